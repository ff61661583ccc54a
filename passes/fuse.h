// fuse: the fusion step of the executor pass (after claim, as Thunder places
// its fusion executors). Runs of fusible statements that one executor claimed
// become one `fusion` statement, a region its fusion executor compiles into a
// single loop nest (executors/fusion/). Only values used after the region are
// its outputs; its intermediates are never allocated.
//
// Pre:  a claimed trace (executors/claim.h); dels anywhere.
// Post: composites whose decomposition a region can hold whole (layer_norm,
//       softmax over the last dim, gelu) are replaced by their statements.
//       Each maximal run of consecutive fusible statements of `target`,
//       two statements or more, is one region over one iteration shape:
//       a statement is per element of that shape or per row (the shape
//       without its innermost dim). Inputs are the values it reads from
//       outside (first use order), outputs the values it defines that
//       statements outside it or the returns read (definition order),
//       subsymbols its statements (unclaimed: the region's executor runs
//       them). A region grows past statements it leaves in place (a column
//       sum, a matmul, a wait) with later statements that read it and
//       nothing those define; they move up to the region, never past an
//       all_gather/reduce_scatter/all_reduce/broadcast, and only earlier,
//       so no collective is issued later and no wait runs earlier: the
//       order of collectives and waits is the schedule's. Dels are placed
//       again (passes/del.h), the region counting as one statement.
//
//   t3 = cpu_mul(t1, 2.0)                 t4, = cpu_fusion0(t1, t2)
//   t4 = cpu_add(t3, t2)          ==>       # t3 = mul(t1, 2.0)
//   del t3                                  # t4 = add(t3, t2)
//
// Fusible: elementwise ops with a scalar expression (ir/scalar_expr.h), sum
// and amax over the innermost dim (per-row values), broadcast_in_dim of a
// value defined before the region, or of a row value along its row, all in
// f32 or bool (what the fusion executors lower); bf16 only in
// convert_element_type and broadcast_in_dim, so a region loads and stores
// bf16 (autocast's casts around the products) but computes in f32, and bf16
// arithmetic keeps the rounding points of its unfused kernels.
#pragma once

#include "ir/target.h"
#include "ir/trace.h"

namespace fsdpc {

// Takes the trace by value: pass an rvalue to let its statements move.
// Fuses the statements claimed by `target`'s compute executor (the ones
// printed with target_name(target) as their prefix).
Trace fuse(Trace trace, Target target);

// Whether `target` has a fusion executor (`--fusion auto` fuses for it).
bool has_fusion_executor(Target target);

}  // namespace fsdpc
