// autocast: mixed precision, as torch.autocast and PyTorch FSDP's
// MixedPrecision(param_dtype=bf16, reduce_dtype=bf16) do it together.
// Parameters stay f32 (the shards the optimizer updates); each is cast to
// the low precision before it is gathered, so all_gather and the gradient
// reduce_scatter move half the bytes, and autodiff casts the reduced
// gradient shard back to f32. Matmul, linear and attention (the FLOPs) run
// in the low precision; every other float op runs in f32, casting a
// low-precision operand up, so softmax, layer_norm, cross_entropy and the
// reductions accumulate and store in f32. Shape ops keep their input's
// dtype. Float results are returned in f32.
//
// Pre:  fsdp ran (parameters reach their uses through synchronize; a
//       parameter used directly is cast at that use).
// Post: every fully_sharded float parameter is cast once, before its
//       synchronize (replicated ones at their uses); matmul,
//       linear and scaled_dot_product_attention read `low` tensors; other
//       float compute ops read f32; float returns are f32; provenance
//       "autocast". The trace is re-emitted, so its names are new.
//
//   t5 = synchronize(t_0_weight, ...)           t9 = convert_element_type(t_0_weight, dtype=bf16)
//   t0 = linear(x, t5)                    ==>   t10 = synchronize(t9, ...)
//                                               t11 = convert_element_type(x, dtype=bf16)
//                                               t12 = linear(t11, t10)
#pragma once

#include "ir/trace.h"

namespace fsdpc {

Trace autocast(const Trace& trace, DType low = DType::bf16);

}  // namespace fsdpc
