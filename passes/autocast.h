// autocast: mixed precision, as torch.autocast and FSDP2's
// MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=...) do it together.
// Parameters stay f32 (the shards the optimizer updates); each is cast to
// the low precision before it is gathered, so all_gather moves half the
// bytes. Each parameter's synchronize carries reduce_dtype: autodiff
// (passes/grad.h) reduces the gradient in it (f32 by default, as FSDP2;
// bf16 halves the reduce_scatter's bytes) and hands the parameter an f32
// gradient. Matmul, linear and attention (the FLOPs) run
// in the low precision; every other float op runs in f32, casting a
// low-precision operand up, so softmax, layer_norm, cross_entropy and the
// reductions accumulate and store in f32. Shape ops keep their input's
// dtype. Float results are returned in f32.
//
// Pre:  fsdp ran (parameters reach their uses through synchronize; a
//       parameter used directly is cast at that use).
// Post: every fully_sharded float parameter is cast once, before its
//       synchronize (replicated ones at their uses); every float
//       parameter's synchronize has reduce_dtype=`reduce`; matmul,
//       linear and scaled_dot_product_attention read `low` tensors; other
//       float compute ops read f32; float returns are f32; provenance
//       "autocast". The trace is re-emitted, so its names are new.
//
//   t5 = synchronize(t_0_weight, ...)           t9 = convert_element_type(t_0_weight, dtype=bf16)
//   t0 = linear(x, t5)                    ==>   t10 = synchronize(t9, ..., reduce_dtype=f32)
//                                               t11 = convert_element_type(x, dtype=bf16)
//                                               t12 = linear(t11, t10)
#pragma once

#include "ir/trace.h"

namespace fsdpc {

// low: bf16 or f16; reduce: the gradients' reduction dtype, f32 or `low`.
Trace autocast(const Trace& trace, DType low = DType::bf16, DType reduce = DType::f32);

}  // namespace fsdpc
