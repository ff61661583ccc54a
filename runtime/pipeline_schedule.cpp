// Pipeline schedules. GPipe (Huang et al. 2019) runs all M forwards, then
// all M backwards: a stage holds every micro-batch's activations. 1F1B
// (PipeDream-Flush, Narayanan et al. 2021; Megatron's default) lets stage s
// run P-1-s forwards ahead, then alternates one forward and one backward,
// so it holds at most P-s micro-batches' activations; both have the same
// bubble, (P-1)/(M+P-1) of the step, and both flush before the update, so
// the gradients are the same as one process's.
#include "runtime/pipeline_schedule.h"

#include <algorithm>

#include "ir/error.h"

namespace fsdpc {

std::optional<PipelineSchedule> parse_pipeline_schedule(const std::string& name) {
  if (name == "gpipe") return PipelineSchedule::gpipe;
  if (name == "1f1b") return PipelineSchedule::one_f_one_b;
  return std::nullopt;
}

const char* pipeline_schedule_name(PipelineSchedule s) {
  return s == PipelineSchedule::gpipe ? "gpipe" : "1f1b";
}

std::vector<PipelineOp> pipeline_order(PipelineSchedule schedule, int stage, int stages, int micro) {
  FSDPC_CHECK(stage >= 0 && stage < stages && micro >= 1) << "pipeline_order(" << stage << ", " << stages << ", " << micro << ")";
  std::vector<PipelineOp> ops;
  if (schedule == PipelineSchedule::gpipe) {
    for (int m = 0; m < micro; ++m) ops.push_back({true, m});
    for (int m = 0; m < micro; ++m) ops.push_back({false, m});
    return ops;
  }
  const int warmup = std::min(stages - 1 - stage, micro);
  int f = 0, b = 0;
  for (; f < warmup; ++f) ops.push_back({true, f});
  while (f < micro) {
    ops.push_back({true, f++});
    ops.push_back({false, b++});
  }
  while (b < micro) ops.push_back({false, b++});
  return ops;
}

int pipeline_in_flight(const std::vector<PipelineOp>& order) {
  int held = 0, most = 0;
  for (const PipelineOp& op : order) {
    held += op.forward ? 1 : -1;
    most = std::max(most, held);
  }
  return most;
}

}  // namespace fsdpc
