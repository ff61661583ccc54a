// The order in which a pipeline stage runs its micro-batches' forwards and
// backwards (runtime/pipeline_schedule.cpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace fsdpc {

enum class PipelineSchedule {
  gpipe,        // every forward, then every backward
  one_f_one_b,  // PipeDream-Flush: warm up, then one forward and one backward at a time
};

std::optional<PipelineSchedule> parse_pipeline_schedule(const std::string& name);  // gpipe | 1f1b
const char* pipeline_schedule_name(PipelineSchedule s);

struct PipelineOp {
  bool forward = true;
  int micro_batch = 0;
  bool operator==(const PipelineOp&) const = default;
};

// Stage `stage`'s order over `micro` micro-batches. Every stage runs its
// backwards in micro-batch order, as its forwards, so what one stage sends
// meets the other's receives in order (point-to-point messages match in
// program order).
std::vector<PipelineOp> pipeline_order(PipelineSchedule schedule, int stage, int stages, int micro);

// The most micro-batches whose saved activations a stage holds at once under
// the order: M for GPipe, min(P - stage, M) for 1F1B.
int pipeline_in_flight(const std::vector<PipelineOp>& order);

}  // namespace fsdpc
