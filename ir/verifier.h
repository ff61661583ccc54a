// The verifier: structural checks every pass's output must pass.
#pragma once

#include "ir/trace.h"

namespace fsdpc {

// Throws fsdpc::Error describing the first problem found, naming the
// statement (index and op) and the value involved:
//  - SSA: every name defined before use and defined once (args included);
//  - arity of each op, and attributes its meta function needs;
//  - meta re-check: recorded output types equal what the meta function infers;
//  - futures: consumed only by `wait`, and waited exactly once, or (at most
//    once) returned, in flight, to a later trace;
//  - `del`: names a value defined and not yet deleted, never a returned one
//    (arguments may be deleted); no statement uses a value after its del;
//  - a fully_sharded tensor is used only by ops that accept one (synchronize,
//    collectives, pack, ...), never where an unsharded value is needed;
//  - sub-symbols: defined from the composite's inputs and defining its outputs;
//  - every returned name is defined.
void verify(const Trace& trace);

}  // namespace fsdpc
