// Dead-code elimination: drops top-level statements whose results nothing
// reads, so later passes and the runtime never compute or hold them.
#pragma once

#include "ir/trace.h"

namespace fsdpc {

// Removes every top-level statement none of whose outputs is used by a later
// statement or returned. A `del` is not a use: it is kept with the names that
// still exist and dropped when none does. A collective dies with its wait
// (the wait is its only reader). Sub-symbols of kept composites are untouched.
//
// Pre:  verify(trace) passes.
// Post: verify() passes; every remaining statement other than `del` has an
//       output that is read or returned; provenance "dce".
//
//   t0 = neg(x)                       t0 = neg(x)
//   ft1 = all_gather(w, ...)    ==>   return t0
//   t2 = wait(ft1)
//   t3 = exp(t2)
//   return t0
// By value: pass an rvalue and the kept statements move instead of being copied.
Trace dce(Trace trace);

}  // namespace fsdpc
