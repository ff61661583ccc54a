// tp: Megatron-style tensor parallelism as a trace transform, run before fsdp
// on the captured trace when the mesh has a tp dimension (--tp T > 1).
//
// Pre:  a captured, unsharded trace (parameters dist none) and the model
//       family's plan (passes/tensor_parallel_plan.h), which names the
//       column-, row- and vocabulary-parallel parameters.
// Post: every tp rank runs this same trace (SPMD) on local parameters:
//       attention's q/k/v projections and the MLP's first projection(s) are
//       column-parallel (their output features, i.e. heads, split T ways),
//       attention's output projection and the MLP's last are row-parallel
//       (input features split). Before each column-parallel block its input
//       goes through Megatron's f, `synchronize(x, group=tp, grad=sum)`
//       (identity forward, all_reduce of the cotangent); after each
//       row-parallel matmul Megatron's g, `all_reduce(.., group=tp,
//       grad=identity)` + wait (the partial sums added, cotangent passed on),
//       before the bias. The token embedding and LM head are split by
//       vocabulary rows (Megatron's vocab-parallel layers; a vocabulary T
//       does not divide is padded to ceil(V / T) rows per rank, the padded
//       logits masked out of the loss): each rank looks up the tokens in
//       its range (others give zero rows, summed by g), the LM head is
//       column-parallel, and cross_entropy becomes Megatron's
//       vocab-parallel form: the max shift by `all_reduce(op=max,
//       grad=none)`, the sums of exp and the target logits by one g, so the
//       full logits are never gathered. A head fused with its loss
//       (passes/fuse_head.h) becomes each rank's
//       linear_cross_entropy_stats over its vocabulary rows, combined the
//       same way, so no rank holds its [tokens, V/T] logits either. The rank's vocabulary offset comes
//       from `axis_index(group=tp)`. Norms and the position embedding stay
//       replicated. Heads (and Llama's kv heads) or features not divisible
//       by T, or a statement the split values cannot pass through, are an
//       fsdpc::Error.
//
//   t21 = matmul(t5, t_h_0_attn_qkv_weight)  # f32[2, 64, 192], weight [64, 192]
// becomes, for T = 2 (weight [64, 96]: each of q, k, v keeps its rank's heads):
//   t250 = synchronize(t5, group=tp, size=2, grad=sum)
//   t251 = matmul(t250, t_h_0_attn_qkv_weight)  # f32[2, 64, 96]
#pragma once

#include "ir/trace.h"
#include "passes/tensor_parallel_plan.h"

namespace fsdpc {

struct TensorParallelOptions {
  int tp = 1;  // ranks per tensor-parallel group
  // Megatron's sequence parallelism: between the tp blocks (norms,
  // residuals, the embedding's output) each rank holds S/T positions;
  // a row-parallel block ends in a reduce_scatter over the sequence instead
  // of g's all_reduce, and a column-parallel block starts with an
  // all_gather instead of f. Replicated weights used there (norms, the
  // row-parallel biases) pass through f so their gradients are summed.
  bool sequence_parallel = false;
  // Which parameters are cut, and how: the model family's (its
  // tensor_parallel_plan()); a parameter no rule matches stays whole.
  TensorParallelPlan plan;
};

Trace tensor_parallel(const Trace& trace, const TensorParallelOptions& options);

}  // namespace fsdpc
