// widen_accumulation: a bf16 (or f16) product or sum whose result is widened
// to f32 at once accumulates into f32 instead, and is never rounded to the
// narrow type in between. Mixed precision makes this pattern everywhere a
// gradient leaves the bf16 compute for the f32 parameters: the weight
// gradient's matmul, a bias's or norm's sum over tokens, the embedding's
// index_add, each followed by convert_element_type(·, f32). Rounded first,
// such a gradient carries one bf16 rounding (2^-9 relative) per rank: N
// ranks that each round their partial sum before the f32 reduce_scatter
// disagree with one process that rounds the whole sum once, and the loss
// drifts apart (1.3e-4 after a few steps of gpt2-tiny). Accumulated in f32,
// the ranks differ from one process only in f32's summation order, as in
// f32 training. Megatron's gradient-accumulation fusion and XLA's
// preferred_element_type make the same trade.
//
// Pre:  verify(trace) passes; no fusion regions, no `del` yet (the pass
//       runs on the joint trace, after grad).
// Post: verify() passes. For every top-level y = P(...) of a narrow float
//       dtype whose only use is z = convert_element_type(y, dtype=f32):
//         matmul     z = matmul(a, b, out_dtype=f32)
//         sum        z = sum(convert_element_type(x, f32), dims)
//         index_add  z = index_add(convert(a), idx, convert(src), dim)
//         add        z = add(convert(a), convert(b))
//         linear_cross_entropy_grad's dw (the fused head's weight gradient)
//                    dh, z = linear_cross_entropy_grad(..., dw_dtype=f32)
//       and for every y = convert_element_type(x, bf16) of an f32 gradient
//       x (computed from the `cotangent` argument) whose only use is
//       z = convert_element_type(y, f32), both casts go and z's uses read
//       x: the gradient of a bf16 parameter that an f32 op read (a norm's
//       weight) is not rounded to bf16 on its way to the f32 parameter. A
//       forward round trip (world size 1's cast parameter) is the model's
//       own rounding and stays.
//       The rewrites sit at P's place (the widened inputs just before it);
//       the convert is gone and z keeps its name and type, so nothing
//       downstream changes.
//       Repeated until none is left: a widened input may be one in turn
//       (a tied embedding's gradient adds its head's product to its
//       lookup's scatter-add).
//       Everything else is kept in order; provenance "widen". A trace
//       with nothing to widen comes back as it was, provenance and all.
//
//   t29 = matmul(t28, t18)  # bf16         t32 = matmul(t28, t18, out_dtype=f32)
//   t32 = convert_element_type(t29,  ==>
//                              dtype=f32)
#pragma once

#include "ir/trace.h"

namespace fsdpc {

Trace widen_accumulation(const Trace& trace);

}  // namespace fsdpc
