// The flight recorder's ring buffer and its JSON dump.
#include "runtime/reliability/flight_recorder.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "executors/comm/mpi_check.h"

namespace fsdpc {

namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Copies what fits of `s` into `out`, NUL-terminated.
void put(char* out, size_t cap, size_t& at, std::string_view s) {
  const size_t n = std::min(s.size(), cap - 1 - at);
  std::memcpy(out + at, s.data(), n);
  at += n;
  out[at] = '\0';
}

// World ranks of `comm`'s members, in its order; empty without MPI.
std::vector<int> world_ranks(MPI_Comm comm) {
  int initialized = 0, finalized = 0;
  FSDPC_MPI_CHECK(MPI_Initialized(&initialized));
  FSDPC_MPI_CHECK(MPI_Finalized(&finalized));
  if (comm == MPI_COMM_NULL || !initialized || finalized) return {};
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  FSDPC_MPI_CHECK(MPI_Comm_group(comm, &group));
  FSDPC_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  int size = 0;
  FSDPC_MPI_CHECK(MPI_Group_size(group, &size));
  std::vector<int> mine(static_cast<size_t>(size)), out(mine.size());
  for (int i = 0; i < size; ++i) mine[static_cast<size_t>(i)] = i;
  FSDPC_MPI_CHECK(MPI_Group_translate_ranks(group, size, mine.data(), world, out.data()));
  FSDPC_MPI_CHECK(MPI_Group_free(&group));
  FSDPC_MPI_CHECK(MPI_Group_free(&world));
  return out;
}

}  // namespace

uint32_t FlightRecorder::group_of(const CollectiveInfo& c) {
  for (size_t i = 0; i < groups_.size(); ++i)
    if (groups_[i].comm == c.comm && groups_[i].name == c.group) return static_cast<uint32_t>(i);
  groups_.push_back({std::string(c.group), c.comm, world_ranks(c.comm), 0});
  return static_cast<uint32_t>(groups_.size() - 1);
}

uint64_t FlightRecorder::issued(const CollectiveInfo& c) {
  const uint64_t seq = next_seq_++;
  FlightEntry& e = ring_[seq % kFlightEntries];
  e.seq = seq;
  e.group = group_of(c);
  e.group_seq = groups_[e.group].issued++;
  e.op = c.op;
  e.dtype = c.dtype;
  size_t at = 0;
  e.statement[0] = '\0';
  if (c.input.empty()) {
    put(e.statement, sizeof e.statement, at, c.output);
  } else {
    for (std::string_view piece : {c.output, std::string_view(" = "), c.op, std::string_view("("), c.input,
                                   std::string_view(")")})
      put(e.statement, sizeof e.statement, at, piece);
  }
  e.count = c.count;
  e.bytes = c.bytes;
  e.issued_ns = steady_ns();
  e.completed_ns = 0;
  e.state = FlightState::issued;
  return seq;
}

void FlightRecorder::completed(uint64_t seq) {
  FlightEntry& e = ring_[seq % kFlightEntries];
  if (e.seq != seq || seq >= next_seq_) return;  // overwritten since: nothing left to mark
  e.completed_ns = steady_ns();
  e.state = FlightState::completed;
}

std::vector<FlightEntry> FlightRecorder::entries() const {
  std::vector<FlightEntry> out;
  const uint64_t first = next_seq_ > kFlightEntries ? next_seq_ - kFlightEntries : 0;
  for (uint64_t s = first; s < next_seq_; ++s) out.push_back(ring_[s % kFlightEntries]);
  return out;
}

const FlightEntry* FlightRecorder::find(uint64_t seq) const {
  const FlightEntry& e = ring_[seq % kFlightEntries];
  return seq < next_seq_ && e.seq == seq ? &e : nullptr;
}

std::string FlightRecorder::to_json(int rank, int world, const std::string& reason) const {
  using nlohmann::json;
  // Steady-clock stamps become wall-clock ones by today's offset.
  const double now_wall =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const int64_t now_ns = steady_ns();
  auto wall = [&](int64_t ns) { return now_wall - static_cast<double>(now_ns - ns) * 1e-9; };
  json j;
  j["fsdpc_flight"] = 1;
  j["rank"] = rank;
  j["world"] = world;
  j["reason"] = reason;
  j["written_at"] = now_wall;
  j["groups"] = json::array();
  for (const FlightGroup& g : groups_) j["groups"].push_back({{"name", g.name}, {"ranks", g.ranks}, {"issued", g.issued}});
  j["collectives"] = json::array();
  for (const FlightEntry& e : entries()) {
    json c = {{"seq", e.seq},
              {"group", groups_.at(e.group).name},
              {"group_index", e.group},
              {"group_seq", e.group_seq},
              {"op", std::string(e.op)},
              {"statement", std::string(e.statement)},
              {"count", e.count},
              {"dtype", std::string(e.dtype)},
              {"bytes", e.bytes},
              {"issued_at", wall(e.issued_ns)},
              {"state", e.state == FlightState::completed ? "completed" : "issued"}};
    c["completed_at"] = e.state == FlightState::completed ? json(wall(e.completed_ns)) : json(nullptr);
    j["collectives"].push_back(std::move(c));
  }
  return j.dump(1) + "\n";
}

std::string FlightRecorder::write(const std::string& dir, int rank, int world, const std::string& reason) const {
  namespace fs = std::filesystem;
  const fs::path path = fs::path(dir) / ("flight-rank" + std::to_string(rank) + ".json");
  const fs::path tmp = fs::path(dir) / ("flight-rank" + std::to_string(rank) + ".json.tmp");
  std::error_code ec;
  fs::create_directories(dir, ec);
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << to_json(rank, world, reason);
    out.close();
    if (!out) {
      std::fprintf(stderr, "fsdpc: rank %d: cannot write the flight recorder to %s\n", rank, tmp.c_str());
      return "";
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    std::fprintf(stderr, "fsdpc: rank %d: cannot rename %s: %s\n", rank, tmp.c_str(), ec.message().c_str());
    return "";
  }
  return path.string();
}

}  // namespace fsdpc
