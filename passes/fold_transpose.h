// fold_transposes: the transposes the CPU executor's matmul reads in place,
// a step of the executor pass under `--fusion auto` (after fuse). A
// `permute` that swaps the last two dims (leading dims in place) and whose
// value only cpu `matmul` statements read costs a copy of the whole tensor;
// oneDNN's matmul takes the permute's input through transposed strides
// instead, so the permute moves into the matmul as a region of the two and
// its value is never allocated (the matmul VJP's dA = dC @ Bᵀ, dB = Aᵀ @ dC
// and attention's Pᵀ @ dO are such permutes).
//
// Pre:  a claimed (and fused) trace; dels anywhere.
// Post: each matmul of `target` that reads such a permute (as a, b or
//       both) is a `fusion` statement at the matmul's place: inputs the
//       permutes' inputs and the other operand (first use order), output
//       the matmul's, subsymbols the permutes then the matmul (unclaimed:
//       the region's executor runs them). A permute folds only when no
//       collective or wait lies between it and its matmul, so the order of
//       collectives and waits, and what runs before each wait, stays the
//       schedule's (the permute only moves later). Dels are placed again
//       (passes/del.h); the provenance is kept.
//
//   t568 = cpu_permute(t567, dims=[1, 0])      t570 = cpu_fusion3(t567, t12)
//   t570 = cpu_matmul(t568, t12)         ==>     # t568 = permute(t567, dims=[1, 0])
//   del t568                                     # t570 = matmul(t568, t12)
#pragma once

#include <optional>
#include "ir/target.h"
#include "ir/trace.h"

namespace fsdpc {

// By value: pass an rvalue and the statements move instead of being copied.
// Folds into the matmuls claimed by `target`'s compute executor.
Trace fold_transposes(Trace trace, Target target);

// Whether `target`'s matmul reads transposed operands in place (cpu).
bool folds_transposes(Target target);

// Whether `dims` swaps the last two of at least two dims, the rest in place.
bool swaps_last_two(const IntList& dims);

// What a folded region computes: out = op(in[a]) @ op(in[b]), where op
// transposes the last two dims of an operand marked transposed.
struct TransposedMatmul {
  size_t a = 0, b = 0;  // input indices of the region statement
  bool a_transposed = false, b_transposed = false;
};

// The folded matmul `region` holds, or nullopt for any other statement
// (an elementwise region, a plain matmul).
std::optional<TransposedMatmul> transposed_matmul(const BoundSymbol& region);

}  // namespace fsdpc
