// A training run's --profile FILE [--profile-steps A:B]: the step timeline of
// every rank (runtime/profiler.h) for steps A to B-1, written by rank 0 as
// one Chrome trace-event file, and the step breakdown printed at the end.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/engine.h"
#include "runtime/profiler.h"
#include "frontend/trainer/train_options.h"

namespace fsdpc {

// The steps to record, [begin, end): --profile-steps A:B, else the two
// steps after `first_step` (the first compiles, JIT-builds kernels and
// makes the optimizer state), as many as the run has. fsdpc::Error (exit 2)
// for text that is not A:B with first_step <= A < B <= --steps.
struct ProfileSteps {
  int64_t begin = 0, end = 0;
};
ProfileSteps profile_steps(const TrainOptions& o, int64_t first_step);
// Before MPI starts: --profile-steps without --profile, a bad A:B, a folder
// that does not exist, an executor whose kernels the host cannot time.
void check_profile_args(const TrainOptions& o);

// The run's profiling, driven by the training loop: nothing at all without
// --profile. With it the constructor is collective (the clock alignment).
class TrainProfile {
 public:
  TrainProfile(const TrainOptions& o, int64_t first_step, std::string description);
  // Detaches the profiler from the engine it was attached to (an error that
  // unwound a profiled step leaves it attached; the engine outlives this).
  ~TrainProfile();
  TrainProfile(const TrainProfile&) = delete;
  TrainProfile& operator=(const TrainProfile&) = delete;
  // Around each step: attaches the profiler to the engine for the profiled
  // steps only, and after the last one gathers and writes the file
  // (collective: every rank reaches the same step).
  void before_step(Engine& engine, int64_t step);
  void after_step(Engine& engine, int64_t step);
  // After the loop (also when a signal stopped it): writes what was
  // recorded if the last profiled step never came. Collective.
  void finish();
  // Rank 0's lines for the end of the run: where the file went and the
  // step breakdown. Empty without --profile.
  const std::string& summary() const { return summary_; }

 private:
  void write();

  std::string path_;
  ProfileSteps steps_;
  std::unique_ptr<Profiler> profiler_;
  Engine* attached_ = nullptr;
  std::string description_, summary_;
  Profiler::Clock::time_point step_begin_;
  bool written_ = false;
};

// "step breakdown ...": the mean of the ranks' breakdowns per step, and each
// rank's exposed communication and hidden share.
std::string format_breakdown(const std::vector<StepBreakdown>& ranks);

}  // namespace fsdpc
