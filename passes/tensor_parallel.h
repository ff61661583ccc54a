// tp: Megatron-style tensor parallelism as a trace transform, run before fsdp
// on the captured trace when the mesh has a tp dimension (--tp T > 1).
//
// Pre:  a captured, unsharded trace of GPT-2 or Llama (parameters dist none).
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
//       full logits are never gathered. The rank's vocabulary offset comes
//       from `axis_index(group=tp)`. Norms and the position embedding stay
//       replicated. Heads (and Llama's kv heads) or features not divisible
//       by T, or a statement the split values cannot pass through, are an
//       fsdpc::Error.
//
//   t21 = matmul(t5, t_h_0_attn_c_attn_weight)  # f32[2, 64, 192], weight [64, 192]
// becomes, for T = 2 (weight [64, 96]: each of q, k, v keeps its rank's heads):
//   t250 = synchronize(t5, group=tp, size=2, grad=sum)
//   t251 = matmul(t250, t_h_0_attn_c_attn_weight)  # f32[2, 64, 96]
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/trace.h"

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
};

// How one parameter is split across the tp ranks: `dim` of the full shape is
// `blocks` equal blocks (GPT-2's fused q|k|v: 3), each cut into T equal
// chunks; tp rank t holds chunk t of every block, in block order.
// `pad` (a vocabulary T does not divide; blocks 1): each part has
// ceil(n / T) entries on `dim`, rank t's the full ones [t * that, n) holds
// and then zeros (Megatron's padded vocabulary), so every rank's part has
// the same shape.
struct TensorParallelSplit {
  std::string param_path;
  int64_t dim = 0;
  int64_t blocks = 1;
  bool pad = false;
};

// The split at T = `tp` of a parameter of full shape `full`, by its module
// path (the plan: GPT-2's c_attn, c_proj, c_fc; Llama's q/k/v/o, gate/up/down
// projections; the token embedding and LM head by vocabulary rows, as
// Megatron's vocab-parallel layers, padded when T does not divide the
// vocabulary), or none when it is replicated on the tp group.
std::optional<TensorParallelSplit> tensor_parallel_split(const std::string& param_path, const Shape& full, int tp);

// The shape of each tp rank's part of a parameter of full shape `full`: `dim`
// is n / T, or ceil(n / T) for a padded split. Every place that sizes a part
// asks here. Throws fsdpc::Error for a split the shape cannot take.
Shape tensor_parallel_part_shape(const TensorParallelSplit& split, const Shape& full, int tp);

// The splits at T = `tp` of every split parameter of `captured`, in argument
// order: what init and checkpoints need to cut a full parameter into a tp
// rank's part.
std::vector<TensorParallelSplit> tensor_parallel_splits(const Trace& captured, int tp);

// The runs of contiguous elements tp rank `rank`'s part of a full parameter
// of shape `full` shares with it, in the part's order: `count` elements at
// `part` in the part are those at `full` in the full tensor; the part's
// elements no run covers are padding (0). The one place the layout is
// written: init, checkpoints and the tests cut and reassemble by it.
// Throws fsdpc::Error for a split the shape cannot take.
struct TensorParallelRun {
  int64_t part = 0, full = 0, count = 0;
};
std::vector<TensorParallelRun> tensor_parallel_runs(const TensorParallelSplit& split, const std::vector<int64_t>& full,
                                                    int tp, int rank);

// Tp rank `rank`'s part (of tensor_parallel_part_shape) of a full parameter
// of shape `full` held row-major in `data`, padding 0.
std::vector<double> tensor_parallel_part(const TensorParallelSplit& split, const std::vector<int64_t>& full,
                                         const std::vector<double>& data, int tp, int rank);

Trace tensor_parallel(const Trace& trace, const TensorParallelOptions& options);

}  // namespace fsdpc
