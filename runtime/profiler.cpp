// The step timeline: recording (cheap, fixed-size records), the breakdown,
// and the trace-event JSON rank 0 gathers and writes.
#include "runtime/profiler.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "executors/comm/mpi_check.h"
#include "ir/error.h"
#include "runtime/planner/step_simulator.h"

namespace fsdpc {

namespace {

template <size_t N>
void copy_name(std::array<char, N>& to, std::string_view from) {
  const size_t n = std::min(from.size(), N - 1);
  std::memcpy(to.data(), from.data(), n);
  to[n] = '\0';
}

// JSON string contents: statement names and labels are plain, but a label
// could carry a quote or a backslash.
std::string escaped(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

// Microseconds with nanosecond digits: what the trace format counts in.
std::string us(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(ns / 1000),
                static_cast<long long>(ns % 1000));
  return buf;
}

constexpr int kStepTid = 1, kComputeTid = 2, kWaitTid = 3, kCommTid = 10;

}  // namespace

double StepBreakdown::hidden_share() const {
  if (in_flight <= 0) return 0;
  return std::clamp(1.0 - exposed / in_flight, 0.0, 1.0);
}

Profiler::Profiler(MPI_Comm world, size_t reserve_events) {
  events_.reserve(reserve_events);
  counters_.reserve(reserve_events);
  input_types_.reserve(8);
  watched_barrier(world, "profile clock", "world");
  watched_barrier(world, "profile clock", "world");  // the first absorbs stragglers
  const Clock::time_point exit = Clock::now();
  // Ranks of one host read one monotonic clock: rank 0's reading is exact.
  MPI_Comm host = MPI_COMM_NULL;
  int on_host = 0, world_size = 0;
  FSDPC_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host));
  FSDPC_MPI_CHECK(MPI_Comm_size(host, &on_host));
  FSDPC_MPI_CHECK(MPI_Comm_free(&host));
  FSDPC_MPI_CHECK(MPI_Comm_size(world, &world_size));
  int64_t origin = exit.time_since_epoch().count();
  if (on_host == world_size)
    watched_bcast(&origin, 1, MPI_INT64_T, 0, world, "profile clock", "world");
  origin_ = Clock::time_point(Clock::duration(origin));
}

void Profiler::add(ProfileEvent e) { events_.push_back(e); }

void Profiler::kernel(const BoundSymbol& b, const std::vector<TensorView>& in, Clock::time_point begin,
                      Clock::time_point end) {
  ProfileEvent e;
  e.begin_ns = since_origin(begin);
  e.end_ns = since_origin(end);
  e.statement = &b;
  if (b.op == OpId::Wait) {
    e.track = ProfileTrack::wait;
  } else {
    e.track = ProfileTrack::compute;
    e.issue = op_info(b.op).has(OpTrait::issue);  // (synchronize never runs: claim refuses it)
    input_types_.clear();
    for (const TensorView& v : in) input_types_.push_back(v.type);
    e.flops = matmul_flops(b, input_types_);
    e.bytes = memory_bytes(b, input_types_);
  }
  add(e);
}

void Profiler::span(ProfileTrack track, std::string_view name, Clock::time_point begin, Clock::time_point end) {
  ProfileEvent e;
  e.track = track;
  e.begin_ns = since_origin(begin);
  e.end_ns = since_origin(end);
  copy_name(e.name, name);
  add(e);
}

void Profiler::blocking_collective(std::string_view op, std::string_view label, std::string_view group,
                                   MPI_Comm comm, int64_t bytes, Clock::time_point begin, Clock::time_point end) {
  ProfileEvent c;
  c.track = ProfileTrack::communication;
  c.begin_ns = since_origin(begin);
  c.end_ns = since_origin(end);
  copy_name(c.name, label);
  copy_name(c.op, op);
  copy_name(c.group, group);
  c.ranks = ranks_of(comm);
  c.bytes = static_cast<double>(bytes);
  add(c);
  ProfileEvent w = c;  // the rank did nothing else meanwhile: all of it exposed
  w.track = ProfileTrack::wait;
  add(w);
}

void Profiler::progress(Clock::time_point begin, Clock::time_point end) {
  // Most polls take a microsecond; an event each would double the file.
  constexpr auto kShown = std::chrono::microseconds(20);
  progress_s_ += std::chrono::duration<double>(end - begin).count();
  if (end - begin < kShown) return;
  ProfileEvent e;
  e.track = ProfileTrack::compute;
  e.progress = true;
  e.begin_ns = since_origin(begin);
  e.end_ns = since_origin(end);
  copy_name(e.name, "MPI progress");
  add(e);
}

void Profiler::memory(const MemStats& stats, Clock::time_point at) {
  if (!counters_.empty() && counters_.back().live == stats.live) return;
  counters_.push_back({since_origin(at), stats.live});
}

uint32_t Profiler::collective_issued(const CollectiveInfo& c) {
  ProfileEvent e;
  e.track = ProfileTrack::communication;
  e.begin_ns = since_origin(Clock::now());
  copy_name(e.name, c.output);
  copy_name(e.op, c.op);
  copy_name(e.group, c.group);
  e.ranks = ranks_of(c.comm);
  e.bytes = static_cast<double>(c.bytes);
  add(e);
  return static_cast<uint32_t>(events_.size() - 1);
}

void Profiler::collective_completed(uint32_t id) {
  if (id < events_.size() && events_[id].end_ns < 0) events_[id].end_ns = since_origin(Clock::now());
}

int32_t Profiler::ranks_of(MPI_Comm comm) {
  for (size_t i = 0; i < ranks_.size(); ++i)
    if (ranks_[i].first == comm) return static_cast<int32_t>(i);
  // A communicator's first use: its members' world ranks (once per group).
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  int size = 0;
  FSDPC_MPI_CHECK(MPI_Comm_group(comm, &group));
  FSDPC_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  FSDPC_MPI_CHECK(MPI_Group_size(group, &size));
  std::vector<int> mine(static_cast<size_t>(size)), theirs(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) mine[static_cast<size_t>(i)] = i;
  FSDPC_MPI_CHECK(MPI_Group_translate_ranks(group, size, mine.data(), world, theirs.data()));
  FSDPC_MPI_CHECK(MPI_Group_free(&group));
  FSDPC_MPI_CHECK(MPI_Group_free(&world));
  std::string list;
  for (int r : theirs) list += (list.empty() ? "" : ",") + std::to_string(r);
  ranks_.emplace_back(comm, list);
  return static_cast<int32_t>(ranks_.size() - 1);
}

StepBreakdown Profiler::breakdown() const {
  StepBreakdown r;
  r.steps = steps_;
  std::vector<std::pair<int64_t, int64_t>> comm;
  for (const ProfileEvent& e : events_) {
    if (e.end_ns < 0) continue;
    const double s = static_cast<double>(e.end_ns - e.begin_ns) * 1e-9;
    switch (e.track) {
      case ProfileTrack::step:
        if (std::strncmp(e.name.data(), "step ", 5) == 0) r.step += s;
        else if (std::strcmp(e.name.data(), "optimizer") == 0) r.optimizer += s;
        break;
      case ProfileTrack::compute:
        if (e.flops > 0) r.matmul += s;
        else if (!e.issue && !e.progress) r.other_compute += s;
        break;
      case ProfileTrack::wait: r.exposed += s; break;
      case ProfileTrack::communication: comm.emplace_back(e.begin_ns, e.end_ns); break;
    }
  }
  // The union of the collectives' spans: two in flight at once count once.
  std::sort(comm.begin(), comm.end());
  int64_t covered = 0, until = INT64_MIN;
  for (auto [b, e] : comm) {
    if (e <= until) continue;
    covered += e - std::max(b, until);
    until = e;
  }
  r.in_flight = static_cast<double>(covered) * 1e-9;
  r.other = std::max(0.0, r.step - r.matmul - r.other_compute - r.exposed - r.optimizer);
  r.progress = progress_s_;
  return r;
}

std::string Profiler::events_json(int rank) const {
  std::ostringstream js;
  js.precision(15);  // FLOPs and bytes exactly (they are whole numbers below 2^53)
  const std::string pid = std::to_string(rank);
  bool first = true;
  auto open = [&](const char* ph, int tid) {
    js << (first ? "" : ",\n") << "{\"ph\":\"" << ph << "\",\"pid\":" << pid << ",\"tid\":" << tid;
    first = false;
  };
  auto name_thread = [&](int tid, const std::string& name) {
    open("M", tid);
    js << ",\"name\":\"thread_name\",\"args\":{\"name\":\"" << name << "\"}}";
    open("M", tid);
    js << ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":" << tid << "}}";
  };
  open("M", 0);
  js << ",\"name\":\"process_name\",\"args\":{\"name\":\"rank " << rank << "\"}}";
  open("M", 0);
  js << ",\"name\":\"process_sort_index\",\"args\":{\"sort_index\":" << rank << "}}";
  name_thread(kStepTid, "step");
  name_thread(kComputeTid, "compute");
  name_thread(kWaitTid, "wait (blocked)");

  // Communication lanes, per group: a collective takes the first lane of
  // its group that is free when it is issued.
  struct Lane {
    std::string group;
    int64_t free_at;
    int tid;
  };
  std::vector<Lane> lanes;
  std::vector<size_t> order;
  for (size_t i = 0; i < events_.size(); ++i)
    if (events_[i].track == ProfileTrack::communication && events_[i].end_ns >= 0) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return events_[a].begin_ns < events_[b].begin_ns; });
  std::vector<int> lane_of(events_.size(), 0);
  for (size_t i : order) {
    const ProfileEvent& e = events_[i];
    Lane* free = nullptr;
    int k = 0;
    for (Lane& l : lanes)
      if (l.group == e.group.data()) {
        ++k;
        if (!free && l.free_at <= e.begin_ns) free = &l;
      }
    if (!free) {
      lanes.push_back({e.group.data(), 0, kCommTid + static_cast<int>(lanes.size())});
      free = &lanes.back();
      name_thread(free->tid, "communication " + free->group + (k ? " #" + std::to_string(k + 1) : ""));
    }
    free->free_at = e.end_ns;
    lane_of[i] = free->tid;
  }

  for (size_t i = 0; i < events_.size(); ++i) {
    const ProfileEvent& e = events_[i];
    if (e.end_ns < 0) continue;
    const int tid = e.track == ProfileTrack::step      ? kStepTid
                    : e.track == ProfileTrack::compute ? kComputeTid
                    : e.track == ProfileTrack::wait    ? kWaitTid
                                                       : lane_of[i];
    open("X", tid);
    js << ",\"ts\":" << us(e.begin_ns) << ",\"dur\":" << us(e.end_ns - e.begin_ns);
    if (e.statement) {
      const BoundSymbol& b = *e.statement;
      const std::string out = b.outputs.empty() ? "" : b.outputs[0].name;
      js << ",\"name\":\"" << escaped(out) << " = " << op_name(b.op) << "\",\"cat\":\""
         << (e.track == ProfileTrack::wait ? "wait" : e.issue ? "issue" : e.flops > 0 ? "matmul" : "compute")
         << "\",\"args\":{\"statement\":\"" << escaped(out) << "\",\"op\":\"" << op_name(b.op) << "\",\"executor\":\""
         << escaped(b.executor) << "\"";
      if (b.op == OpId::Wait && !b.inputs.empty()) js << ",\"future\":\"" << escaped(b.inputs[0].name) << "\"";
      if (e.flops > 0) js << ",\"flops\":" << e.flops;
      if (e.bytes > 0) js << ",\"bytes\":" << e.bytes;
      js << "}}";
    } else if (e.track == ProfileTrack::step || e.progress) {
      js << ",\"name\":\"" << escaped(e.name.data()) << "\",\"cat\":\"" << (e.progress ? "progress" : "step") << "\"}";
    } else {
      js << ",\"name\":\"" << e.op.data() << " " << escaped(e.name.data()) << "\",\"cat\":\""
         << (e.track == ProfileTrack::wait ? "wait" : "communication") << "\",\"args\":{\"op\":\"" << e.op.data()
         << "\",\"group\":\"" << escaped(e.group.data()) << "\",\"ranks\":\""
         << (e.ranks >= 0 ? ranks_[static_cast<size_t>(e.ranks)].second : "") << "\",\"bytes\":" << e.bytes << "}}";
    }
  }
  for (const ProfileCounter& c : counters_) {
    open("C", 0);
    js << ",\"name\":\"live memory\",\"ts\":" << us(c.at_ns) << ",\"args\":{";
    for (size_t k = 0; k < kNumMemCategories; ++k)
      js << (k ? "," : "") << "\"" << mem_category_name(static_cast<MemCategory>(k)) << "\":" << c.live[k];
    js << "}}";
  }
  return js.str();
}

std::vector<StepBreakdown> gather_breakdowns(const StepBreakdown& mine, MPI_Comm world) {
  constexpr int kFields = 9;
  const double send[kFields] = {static_cast<double>(mine.steps), mine.step,      mine.matmul,
                                mine.other_compute,              mine.exposed,   mine.optimizer,
                                mine.other,                      mine.in_flight, mine.progress};
  int size = 0;
  FSDPC_MPI_CHECK(MPI_Comm_size(world, &size));
  std::vector<double> all(static_cast<size_t>(size * kFields));
  watched_allgather(send, kFields, MPI_DOUBLE, all.data(), world, "profile breakdown", "world");
  std::vector<StepBreakdown> out(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    const double* d = all.data() + r * kFields;
    out[static_cast<size_t>(r)] = {static_cast<int>(d[0]), d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8]};
  }
  return out;
}

std::string write_profile(const Profiler& profiler, const std::string& path, MPI_Comm world,
                          const std::string& description) {
  int rank = 0, size = 0;
  FSDPC_MPI_CHECK(MPI_Comm_rank(world, &rank));
  FSDPC_MPI_CHECK(MPI_Comm_size(world, &size));
  const std::string mine = profiler.events_json(rank);
  // Every rank learns every size first, so all refuse a file MPI cannot
  // count (its counts are ints) together, before the gather.
  const int64_t my_size = static_cast<int64_t>(mine.size());
  std::vector<int64_t> sizes(static_cast<size_t>(size));
  watched_allgather(&my_size, 1, MPI_INT64_T, sizes.data(), world, "profile sizes", "world");
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  if (total > INT_MAX)
    return "--profile: the ranks' events take " + std::to_string(total) +
           " bytes, more than one MPI gather moves; profile fewer steps (--profile-steps)";
  std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  for (int r = 0, at = 0; r < size; ++r) {
    counts[static_cast<size_t>(r)] = static_cast<int>(sizes[static_cast<size_t>(r)]);
    displs[static_cast<size_t>(r)] = at;
    at += counts[static_cast<size_t>(r)];
  }
  std::string all(rank == 0 ? static_cast<size_t>(total) : 0, '\0');
  MPI_Request request = MPI_REQUEST_NULL;
  FSDPC_MPI_CHECK(MPI_Igatherv(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, rank == 0 ? all.data() : nullptr,
                               counts.data(), displs.data(), MPI_CHAR, 0, world, &request));
  CollectiveWatch* watch = collective_watch();
  const uint64_t id =
      watch ? watch->issued({"gather", "profile events", "", "world", world, my_size, "u8", total}) : 0;
  mpi_wait_watched(&request, id);
  if (watch) watch->completed(id);

  std::string error;
  if (rank == 0) {
    // Written beside its final name and renamed: a reader never sees half a file.
    const std::string tmp = path + ".tmp-" + std::to_string(getpid());
    {
      std::ofstream out(tmp, std::ios::trunc | std::ios::binary);
      out << "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":\"fsdpc train --profile\",\"ranks\":" << size
          << ",\"description\":\"" << escaped(description) << "\"},\n\"traceEvents\":[\n";
      for (int r = 0; r < size; ++r) {
        if (r > 0 && counts[static_cast<size_t>(r)] > 0) out << ",\n";
        out.write(all.data() + displs[static_cast<size_t>(r)], counts[static_cast<size_t>(r)]);
      }
      out << "\n]}\n";
      out.flush();
      if (!out) error = "--profile " + path + ": cannot write " + tmp;
    }
    std::error_code ec;
    if (error.empty()) std::filesystem::rename(tmp, path, ec);
    if (error.empty() && ec) error = "--profile " + path + ": cannot rename " + tmp + " into place: " + ec.message();
    if (!error.empty()) std::filesystem::remove(tmp, ec);
  }
  // Rank 0's verdict, to every rank.
  int64_t failed = error.empty() ? 0 : 1;
  watched_bcast(&failed, 1, MPI_INT64_T, 0, world, "profile written", "world");
  if (failed && rank != 0) error = "--profile " + path + ": rank 0 could not write the file";
  return error;
}

}  // namespace fsdpc
