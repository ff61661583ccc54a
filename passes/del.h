// Memory lifetimes made explicit: `del` after each value's last use, so the
// printed trace shows when every buffer is freed and the runtime frees it.
#pragma once

#include "ir/trace.h"

namespace fsdpc {

// Removes any `del` already present, then, after the top-level statement
// holding a value's last use, emits `del` naming every value whose last use
// that was (grouped in definition order; one del per device, since an op's
// inputs share a device). Deleted: statement outputs and arguments that are
// not parameters (activations, saved tensors, gradients a backward trace
// receives). Never deleted: parameters (persistent state the optimizer
// updates), returned values, futures (the wait's output is the same buffer;
// freeing it frees the future's), names inside decompositions. A value never
// used is deleted right after its definition; an unused argument at the top.
// Registered as "del"; named insert_dels because `del` reads as a keyword.
//
// Pre:  verify(trace) passes.
// Post: verify() passes; each such value is deleted exactly once, right after
//       its last use; idempotent; provenance "del".
//
//   t0 = neg(x)            t0 = neg(x)
//   t1 = exp(t0)     ==>   del x
//   return t1              t1 = exp(t0)
//                          del t0
//                          return t1
Trace insert_dels(const Trace& trace);

}  // namespace fsdpc
