// DiLoCo's outer step (fsdpc train --outer-steps): see passes/outer_step.cpp.
#pragma once

#include <string_view>

#include "ir/mesh.h"
#include "ir/trace.h"
#include "passes/strategy.h"

namespace fsdpc {

// DiLoCo (Douillard et al. 2023): the replicas of a hybrid mesh train apart
// for `outer_steps` inner steps, without the per-step all_reduce of the
// gradients over `replicate`, then meet in an outer step. The defaults are
// the paper's.
struct DilocoOptions {
  int outer_steps = 0;          // H; 0: off (every step all-reduces over replicate)
  double outer_lr = 0.7;        // the outer SGD's rate
  double outer_momentum = 0.9;  // its Nesterov momentum; 0: plain SGD, no buffer
  // What crosses the slow link: f32 (an all_reduce), bf16 (each replica's
  // delta rounded to bf16 and all-gathered, the sum taken in f32) or i8
  // (the delta quantized in int8 blocks, ir/quantize.h, all-gathered,
  // dequantized and summed in f32).
  DType outer_dtype = DType::f32;
  bool enabled() const { return outer_steps > 0; }
};

// fsdpc::Error naming the flag: H, rate or momentum out of range, or DiLoCo
// on a strategy without replicas (it needs hybrid or hybrid_zero2), or an
// outer dtype other than f32, bf16 and i8.
void check_diloco_options(const DilocoOptions& d, Strategy strategy);

// The outer dtype as --outer-dtype spells it: f32, bf16, int8.
std::string_view outer_dtype_name(DType d);

// Pre:  `sharded`'s parameter arguments are this rank's shards (the fsdp
//       pass's output, passes/fsdp.h, or a later trace); d.enabled().
// Post: the trace "outer", which verifies. Its arguments, for each parameter
//       that requires grad in argument order: the parameter's value (the
//       proxy as `sharded` has it, param_path kept), anchor_<p> and, when
//       outer_momentum != 0, momentum_<p>. It returns (anchor'...,
//       momentum'...), each in that order:
//         delta     = (anchor - theta) / R           (R = mesh.replicas)
//         delta     = all_reduce(delta, replicate)   (sum: the mean over replicas)
//                     or, with outer_dtype bf16, the sum over dim 0 in f32 of
//                     f32(all_gather(bf16(delta), replicate)), flattened;
//                     with i8, of dequantize(all_gather(quantize(delta)))
//         momentum' = outer_momentum * momentum + delta
//         anchor'   = anchor - outer_lr * (delta + outer_momentum * momentum')
//       which is torch.optim.SGD(nesterov=True) taking the averaged delta as
//       the anchor's gradient. The caller then sets theta <- anchor'. Every
//       all_reduce is issued before the first wait, and `del` frees each
//       value after its last use.
// The arguments are typed as local tensors (dist none) of the shard's
// shape: the step is elementwise arithmetic on each rank's own rows, which
// the IR's elementwise ops take only from values that are not shards.
Trace outer_step_trace(const Trace& sharded, const DilocoOptions& d, const Mesh& mesh);

}  // namespace fsdpc
