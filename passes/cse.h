// Common-subexpression elimination: a statement that recomputes what an
// earlier one computed (same op, inputs and attributes) reuses its result.
#pragma once

#include "ir/trace.h"

namespace fsdpc {

// Replaces each top-level statement identical to an earlier one (same op,
// same inputs after renaming, same attributes, same output types) by the
// earlier result and renames later uses, returns included. Every op is pure
// except the collectives, wait and del, which are never merged; creation ops
// (full, iota) merge. A value already freed by `del` is not reused, and a
// `del` naming a merged value (either side) is dropped, since the kept value
// now lives as long as both did: run `del` after `cse` to free it again.
// Deterministic: the first occurrence wins.
//
// Pre:  verify(trace) passes.
// Post: verify() passes; no two non-collective statements are identical;
//       provenance "cse".
//
//   t0 = broadcast_in_dim(t_b, ...)        t0 = broadcast_in_dim(t_b, ...)
//   t1 = broadcast_in_dim(t_b, ...)  ==>   t2 = add(t0, t0)
//   t2 = add(t0, t1)
// By value: pass an rvalue and the statements move instead of being copied.
Trace cse(Trace trace);

}  // namespace fsdpc
