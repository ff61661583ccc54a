// Pipeline step time by replaying every stage's order (runtime/planner/pipeline_timing.h).
#include "runtime/planner/pipeline_timing.h"

#include <algorithm>

#include "ir/error.h"

namespace fsdpc {

PipelineTiming pipeline_timing(const std::vector<PipelineStageTimes>& stages, double transfer,
                               PipelineSchedule schedule, int micro_batches) {
  const int p = static_cast<int>(stages.size()), m = micro_batches;
  if (p < 1) fail("pipeline timing: no stages");
  if (m < 1) fail("pipeline timing: ", m, " micro-batches (expected at least 1)");
  if (transfer < 0) fail("pipeline timing: a negative transfer time ", transfer);
  for (const PipelineStageTimes& s : stages)
    if (s.forward < 0 || s.backward < 0 || s.before < 0 || s.after < 0) fail("pipeline timing: a negative stage time");
  std::vector<std::vector<PipelineOp>> order(static_cast<size_t>(p));
  for (int s = 0; s < p; ++s) order[s] = pipeline_order(schedule, s, p, m);
  // end[s][m]: when stage s finished micro-batch m's forward (or backward); < 0: not yet.
  std::vector<std::vector<double>> fwd_end(p, std::vector<double>(m, -1)), bwd_end(p, std::vector<double>(m, -1));
  std::vector<size_t> next(p, 0);
  PipelineTiming t;
  t.busy.assign(p, 0);
  t.idle.assign(p, 0);
  std::vector<double> clock(p, 0);
  for (int s = 0; s < p; ++s) {
    clock[s] = stages[s].before;
    t.busy[s] = stages[s].before;
  }
  // Every op whose input has arrived runs; a valid order always has one
  // until all are done (each stage's orders match its neighbours').
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int s = 0; s < p; ++s) {
      while (next[s] < order[s].size()) {
        const PipelineOp& op = order[s][next[s]];
        double ready = 0;  // when its input is here
        if (op.forward && s > 0) {
          if (fwd_end[s - 1][op.micro_batch] < 0) break;
          ready = fwd_end[s - 1][op.micro_batch] + transfer;
        } else if (!op.forward && s + 1 < p) {
          if (bwd_end[s + 1][op.micro_batch] < 0) break;
          ready = bwd_end[s + 1][op.micro_batch] + transfer;
        }
        const double start = std::max(clock[s], ready), seconds = op.forward ? stages[s].forward : stages[s].backward;
        t.idle[s] += start - clock[s];
        clock[s] = start + seconds;
        t.busy[s] += seconds;
        (op.forward ? fwd_end : bwd_end)[s][op.micro_batch] = clock[s];
        ++next[s];
        progressed = true;
      }
    }
  }
  for (int s = 0; s < p; ++s)
    FSDPC_CHECK(next[s] == order[s].size()) << "pipeline timing: stage " << s << " never got its input";
  for (int s = 0; s < p; ++s) {
    clock[s] += stages[s].after;
    t.busy[s] += stages[s].after;
  }
  t.seconds = *std::max_element(clock.begin(), clock.end());
  for (int s = 0; s < p; ++s) t.idle[s] += t.seconds - clock[s];  // waiting for the flush
  return t;
}

}  // namespace fsdpc
