// The rank files of a resumable checkpoint (Engine::save_rank_state): each
// holds one rank's rows of every parameter and of its optimizer state, and
// its metadata says where those rows sit in the full parameter, so that a
// run at another (dp, tp) layout can read back the rows it needs. Tensor
// parallelism's layout comes from tensor_parallel_runs() (passes/
// tensor_parallel_plan.h) and nowhere else.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/types.h"
#include "passes/tensor_parallel_plan.h"
#include "runtime/io/safetensors.h"

namespace fsdpc {

// Where one rank file's tensor of a parameter (or of its optimizer state)
// sits: rows [row_begin, row_begin + its rows) of tp rank `tp_rank`'s part,
// cut by `split` into `tp` parts; tp 1: of the full parameter.
struct PartPlacement {
  int64_t row_begin = 0;
  int tp = 1, tp_rank = 0;
  TensorParallelSplit split;  // meaningful when tp > 1
};

// Records `p` in a rank file's metadata under "<param>.row_begin",
// "<param>.tp" and, for a tp part, "<param>.tp_rank", ".tp_dim", ".tp_blocks",
// ".tp_pad".
void write_placement(std::map<std::string, std::string>& meta, const std::string& param, const PartPlacement& p);

// The rank files rank-0 .. rank-(W-1) of a checkpoint folder, W the world
// its rank-0 file records. Throws fsdpc::Error naming the file on a missing
// or malformed one.
class RankFiles {
 public:
  explicit RankFiles(const std::string& dir);
  size_t size() const { return files_.size(); }
  // An integer of file k's metadata; fails naming the file when absent.
  int64_t meta(size_t k, const std::string& key) const;
  bool has_meta(size_t k, const std::string& key) const;
  // Keeps only the files whose metadata `key` is `value` (DiLoCo's
  // replicas, whose parameters differ within a round, each read their own);
  // fails naming the folder when none is left.
  void keep_only(const std::string& key, int64_t value);
  // Where file k holds `param`, checked against the parameter's full shape
  // and against how `plan` (this model's tp plan) cuts it at the file's tp.
  PartPlacement placement(size_t k, const std::string& param, const Shape& full, const TensorParallelPlan& plan) const;
  // Whether any file holds `param` as tensor-parallel parts.
  bool holds_tp_parts(const std::string& param) const;
  // Whether file k holds tensor `name`. A pipeline stage's file (metadata
  // pp > 1) holds only its stage's parameters; any other file lacking one
  // is damaged: fails naming it.
  bool holds(size_t k, const std::string& name) const;
  // An integer of `param`'s metadata, from the first file that holds it.
  int64_t param_meta(const std::string& param, const std::string& key) const;

  // Rows [row_begin, row_begin + rows) of tensor `name` (parameter `param`
  // of `full_rows` rows, or its optimizer state), when every file holds it
  // as rows of the full parameter: the writer's shards may be cut otherwise
  // (another world size or strategy). Rows past full_rows are padding: 0.
  void read_rows(const std::string& name, const std::string& param, int64_t full_rows, int64_t row_begin,
                 int64_t rows, int64_t cols, float* out) const;
  // The whole of tensor `name` (parameter `param` of shape `full`, or its
  // optimizer state), put together from whichever files hold its elements,
  // each file's part mapped back through tensor_parallel_runs(); a part
  // `plan` would cut otherwise is refused.
  std::vector<float> read_full(const std::string& name, const std::string& param, const Shape& full,
                               const TensorParallelPlan& plan) const;

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
};

}  // namespace fsdpc
