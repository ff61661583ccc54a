// A training run's --profile: the steps recorded, and the summary
// (frontend/trainer/train_profile.h).
#include "frontend/trainer/train_profile.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>

#include "executors/claim.h"
#include "executors/comm/mpi_world.h"
#include "ir/error.h"
#include "runtime/io/files.h"
#include "runtime/reliability/consistency.h"

namespace fsdpc {

namespace {

bool parse_step(std::string_view text, int64_t& out) {
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && p == end && !text.empty();
}

std::string ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", seconds * 1e3);
  return buf;
}

std::string part(const char* name, double seconds, double step) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s %s (%.0f%%)", name, ms(seconds).c_str(), step > 0 ? 100 * seconds / step : 0.0);
  return buf;
}

}  // namespace

ProfileSteps profile_steps(const TrainOptions& o, int64_t first_step) {
  if (o.profile_steps.empty()) {
    const int64_t begin = std::min<int64_t>(first_step + 1, o.steps - 1);
    return {std::max(begin, first_step), std::min<int64_t>(begin + 2, o.steps)};
  }
  const std::string& t = o.profile_steps;
  const size_t colon = t.find(':');
  ProfileSteps s;
  if (colon == std::string::npos || !parse_step(std::string_view(t).substr(0, colon), s.begin) ||
      !parse_step(std::string_view(t).substr(colon + 1), s.end))
    fail("--profile-steps '", t, "': expected A:B, the steps A to B-1 to record (such as 1:3)");
  if (s.begin < first_step || s.begin >= s.end || s.end > o.steps)
    fail("--profile-steps ", t, ": expected ", first_step, " <= A < B <= ", o.steps, " (the run's steps ",
         first_step, " to ", o.steps - 1, first_step > 0 ? ", after --resume" : "", "; B is not recorded)");
  return s;
}

void check_profile_args(const TrainOptions& o) {
  if (o.profile.empty()) {
    if (!o.profile_steps.empty()) fail("--profile-steps ", o.profile_steps, ": there is nothing to record without --profile FILE");
    return;
  }
  profile_steps(o, 0);  // the text and the upper bound; a resume's start is checked once known
  check_writable_file("--profile", o.profile);
  if (o.engine.target != Target::cpu)
    fail("--profile times kernels on the host, which with --executor ", target_name(o.engine.target),
         " would be their launches; it records the cpu executor only");
}

TrainProfile::TrainProfile(const TrainOptions& o, int64_t first_step, std::string description)
    : path_(o.profile), description_(std::move(description)) {
  if (path_.empty()) return;
  try {
    steps_ = profile_steps(o, first_step);
  } catch (const Error& e) {  // every rank resumed at the same step: all refuse alike
    exit_all_ranks(2, e.what());
  }
  profiler_ = std::make_unique<Profiler>(MPI_COMM_WORLD);
}

TrainProfile::~TrainProfile() {
  if (attached_) attached_->set_profiler(nullptr);
}

void TrainProfile::before_step(Engine& engine, int64_t step) {
  if (!profiler_ || step < steps_.begin || step >= steps_.end) return;
  engine.set_profiler(profiler_.get());
  attached_ = &engine;
  step_begin_ = Profiler::Clock::now();
  profiler_->memory(engine.memory(), step_begin_);
}

void TrainProfile::after_step(Engine& engine, int64_t step) {
  if (!profiler_ || step < steps_.begin || step >= steps_.end) return;
  const Profiler::Clock::time_point now = Profiler::Clock::now();
  profiler_->memory(engine.memory(), now);
  profiler_->span(ProfileTrack::step, "step " + std::to_string(step), step_begin_, now);
  profiler_->count_step();
  engine.set_profiler(nullptr);
  attached_ = nullptr;
  if (step + 1 == steps_.end) write();
}

void TrainProfile::finish() {
  if (profiler_ && !written_ && profiler_->steps() > 0) write();
  if (profiler_ && profiler_->steps() == 0 && mpi_world_rank() == 0)
    summary_ = "profile: no step of " + std::to_string(steps_.begin) + ".." + std::to_string(steps_.end - 1) +
               " ran; nothing written to " + path_ + "\n";
}

void TrainProfile::write() {
  written_ = true;
  const std::string error = write_profile(*profiler_, path_, MPI_COMM_WORLD, description_);
  if (!error.empty()) exit_all_ranks(2, error);
  const std::vector<StepBreakdown> ranks = gather_breakdowns(profiler_->breakdown(), MPI_COMM_WORLD);
  if (mpi_world_rank() != 0) return;
  const int n = profiler_->steps();
  summary_ = "profile: step" + std::string(n == 1 ? " " : "s ") + std::to_string(steps_.begin) +
             (n == 1 ? "" : ".." + std::to_string(steps_.begin + n - 1)) + " of " + std::to_string(ranks.size()) +
             " rank" + (ranks.size() == 1 ? "" : "s") + " written to " + path_ + " (" +
             std::to_string(profiler_->event_count()) + " events on rank 0; open it in Perfetto or chrome://tracing)\n" +
             format_breakdown(ranks);
}

std::string format_breakdown(const std::vector<StepBreakdown>& ranks) {
  StepBreakdown m;
  for (const StepBreakdown& r : ranks) {
    const double k = r.steps > 0 ? 1.0 / (r.steps * static_cast<double>(ranks.size())) : 0;
    m.step += r.step * k;
    m.matmul += r.matmul * k;
    m.other_compute += r.other_compute * k;
    m.exposed += r.exposed * k;
    m.optimizer += r.optimizer * k;
    m.other += r.other * k;
    m.in_flight += r.in_flight * k;
    m.progress += r.progress * k;
  }
  std::string out = "step breakdown (per step, mean of " + std::to_string(ranks.size()) + " rank" +
                    (ranks.size() == 1 ? "" : "s") + "): " + ms(m.step) + " = " + part("matmul", m.matmul, m.step) +
                    " + " + part("other compute", m.other_compute, m.step) + " + " +
                    part("exposed communication", m.exposed, m.step) + " + " +
                    part("optimizer", m.optimizer, m.step) + " + " + part("other", m.other, m.step) +
                    " (of which polling collectives between kernels " + ms(m.progress) + ")\n";
  char buf[160];
  std::snprintf(buf, sizeof buf, "communication: %s per step in flight, %.0f%% hidden behind other work",
                ms(m.in_flight).c_str(), 100 * m.hidden_share());
  out += buf;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const double k = ranks[r].steps > 0 ? 1.0 / ranks[r].steps : 0;
    std::snprintf(buf, sizeof buf, "%s rank %zu %s exposed, %.0f%% hidden", r == 0 ? ";" : ",", r,
                  ms(ranks[r].exposed * k).c_str(), 100 * ranks[r].hidden_share());
    out += buf;
  }
  return out + "\n";
}

}  // namespace fsdpc
