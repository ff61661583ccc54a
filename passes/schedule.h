// schedule: where each collective is issued and waited (see passes/schedule.cpp).
#pragma once

#include <vector>

#include "ir/trace.h"
#include "passes/wrap.h"

namespace fsdpc {

struct ScheduleOptions {
  int prefetch = 1;      // all_gathers issued this many units ahead of their use
  int max_inflight = 2;  // at most this many all_gathers issued and not yet waited
  std::vector<Unit> units;
};

// Reorders the statements of a forward or backward trace; throws
// fsdpc::Error on prefetch < 0 or max_inflight < 1.
Trace schedule(const Trace& trace, const ScheduleOptions& options);

// For a step-level trace of independent collectives (gather_once's,
// outer_step's): every collective issued before any wait, so that they all
// overlap. Each statement that does not wait goes as early as its inputs
// allow; a wait goes only when nothing else can, the earliest first.
void issue_before_waiting(Trace& t);

}  // namespace fsdpc
