// The tensor-parallel plan and layout: which parameters the tp pass
// (passes/tensor_parallel.h) cuts and how, and where a tp rank's part of a
// cut parameter sits in the full tensor.
//
// The plan is data a model family hands down (frontend/models/<family>/,
// through PipelineOptions and EngineOptions): rules from parameter-path
// patterns to a column-, row- or vocabulary-parallel split. Nothing here
// knows a model's parameter names, so a new family brings its plan in its
// own folder and passes/ does not change. The layout functions are the one
// place a part's shape and position are written: the pass, init,
// checkpoints and the tests all cut and reassemble by them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/trace.h"

namespace fsdpc {

// How one parameter is split across the tp ranks: `dim` of the full shape is
// `blocks` equal blocks (a fused q|k|v projection: 3), each cut into T equal
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

// One rule of a plan. `pattern` is a parameter path or its tail at a
// component boundary: "mlp.fc.weight" matches "mlp.fc.weight" and
// "blocks.3.mlp.fc.weight", not "mlp.fc.weight2" or "xmlp.fc.weight".
// The kinds (Megatron's parallel layers):
// - column: a weight's output features (heads) are split, on `dim` (1 for
//   an [in, out] weight, 0 for an [out, in] one) in `blocks` blocks; its
//   bias, in a rule of its own, on dim 0 in as many blocks. The tp pass
//   puts f before the product.
// - row: a weight's input features are split, on `dim`; its bias has no
//   rule: it stays whole and is added once, after g.
// - vocab: a table's rows (dim 0 of a 2-D [vocab, hidden] parameter), the
//   token embedding or the LM head; a vocabulary T does not divide is
//   padded, as Megatron does, rather than left whole on every rank. Only a
//   vocabulary may be padded: a padded head or feature would change what
//   the model computes. At T = 1 a vocab rule cuts nothing.
struct TensorParallelRule {
  enum class Kind { column, row, vocab };
  std::string pattern;
  Kind kind = Kind::column;
  int64_t dim = 0;
  int64_t blocks = 1;

  static TensorParallelRule column(std::string pattern, int64_t dim, int64_t blocks = 1) {
    return {std::move(pattern), Kind::column, dim, blocks};
  }
  static TensorParallelRule row(std::string pattern, int64_t dim) { return {std::move(pattern), Kind::row, dim, 1}; }
  static TensorParallelRule vocab(std::string pattern) { return {std::move(pattern), Kind::vocab, 0, 1}; }
};

// A model family's plan: its rules, the first that matches a path wins. A
// parameter no rule matches is replicated on the tp group (norms, position
// embeddings, row-parallel biases); an empty plan replicates every
// parameter, and the tp pass then refuses whatever a split value would
// need, so a model the plan does not fit is refused, never silently wrong.
struct TensorParallelPlan {
  std::vector<TensorParallelRule> rules;

  bool empty() const { return rules.empty(); }
  // The split at T = `tp` of a parameter of full shape `full`, by its path,
  // or none when it stays whole on the tp group.
  std::optional<TensorParallelSplit> split(const std::string& param_path, const Shape& full, int tp) const;
  // The splits at T = `tp` of every split parameter of `captured`, in
  // argument order: what init and checkpoints need to cut a full parameter
  // into a tp rank's part.
  std::vector<TensorParallelSplit> splits(const Trace& captured, int tp) const;
};

// The shape of each tp rank's part of a parameter of full shape `full`: `dim`
// is n / T, or ceil(n / T) for a padded split. Every place that sizes a part
// asks here. Throws fsdpc::Error for a split the shape cannot take.
Shape tensor_parallel_part_shape(const TensorParallelSplit& split, const Shape& full, int tp);

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

}  // namespace fsdpc
