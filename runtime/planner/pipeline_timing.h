// The step time of pipeline stages: each stage runs its micro-batches'
// forwards and backwards in its schedule's order (runtime/pipeline_schedule.h),
// a forward waits for the activation of the stage before, a backward for the
// gradient of the stage after. Given how long one micro-batch's forward and
// backward take on each stage (the step simulator's times of the stage's
// traces) and how long a transfer between neighbours takes, this replays
// every stage's order and returns when the last one finishes: the bubble,
// and any stage slower than the others, come out of it.
#pragma once

#include <vector>

#include "runtime/pipeline_schedule.h"

namespace fsdpc {

struct PipelineStageTimes {
  double forward = 0, backward = 0;  // seconds of one micro-batch on the stage
  // Once a step (--keep-gathered): before the stage's first micro-batch (its
  // gather) and after its last (its reduce).
  double before = 0, after = 0;
};

struct PipelineTiming {
  double seconds = 0;               // from the first stage's start to the last one's end (its `after` included)
  std::vector<double> busy, idle;   // per stage: running, and waiting on a neighbour (the bubble)
};

// `transfer`: seconds from a stage's send to its neighbour's having it (the
// activation forward and its gradient back: the same size). Throws
// fsdpc::Error for no stages, fewer than one micro-batch or a negative time.
PipelineTiming pipeline_timing(const std::vector<PipelineStageTimes>& stages, double transfer,
                               PipelineSchedule schedule, int micro_batches);

}  // namespace fsdpc
