// What a training run reports, on rank 0: the header before the first step,
// a record after each step (printed as a line, written as a JSON line, and
// handed to TrainOptions::on_step), and the summary line at the end.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "frontend/model.h"
#include "frontend/trainer/train_options.h"
#include "runtime/allocator.h"
#include "runtime/engine.h"
#include "runtime/planner/memory_plan.h"

namespace fsdpc {

// One step as rank 0 saw it.
struct StepRecord {
  int64_t step = 0;
  StepResult result;
  std::optional<double> val_loss;  // when this step evaluated
  int64_t tokens = 0;              // tokens (rows for feature models) of the global batch
  double tokens_per_s = 0;
  // Where the run stands: steps done (counting those before a resume) of
  // the total; this process's time and the ETA at its mean step time.
  int64_t done = 0, total = 0;
  double elapsed_s = 0, eta_s = 0;
  MemStats memory;  // measured this step
  // The memory plan's peak of this step (with the evaluation when there was
  // one), and its reserved bytes after it (a fresh run only).
  MemBytes predicted{};
  int64_t predicted_total = 0;
  std::string predicted_where;
  int64_t reserved = 0;
  std::optional<int64_t> predicted_reserved;
};

// "850ms", "42.0s", "3m07s", "2h05m": short enough for every log line.
std::string format_duration(double seconds);

// The two header lines: the model, world, layout and executor; the
// optimizer and its schedule, and the steps to run.
std::string train_header(const TrainOptions& o, const Model& model, int world, int64_t first_step);
// "step    3  loss 2.5113  lr ..." (no newline).
std::string step_line(const StepRecord& r);
// The first printed step's line on the plan beside the measured peak.
std::string memory_line(const StepRecord& r);
// One JSON object, as --log-json writes a line.
std::string step_json(const StepRecord& r);

}  // namespace fsdpc
