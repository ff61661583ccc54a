// Host-side planning of the nn kernels (softmax, layer_norm, cross_entropy,
// attention): how a shape splits into rows, whether a row gets a warp or a
// block, and how attention's heads are grouped so its score scratch stays
// bounded. Plain sizes in and out (no IR types), so the .cu files can plan
// their own launches and the test can check it all without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "executors/cuda/launch.h"

namespace fsdpc::cuda {

// Rows at most this long get one warp each, when there are enough of them:
// a warp's 32 lanes cover up to 32 elements each per pass with shuffles
// alone, where a block would pay two __syncthreads per reduction.
constexpr int64_t kWarpRowMaxCols = 1024;
// Below this many rows a warp each leaves most SMs idle (132 SMs hold 8
// warps of ours each at once): long rows then get a block each instead.
constexpr int64_t kWarpRowMinRows = 1024;
// Warps per block on the warp-per-row path.
constexpr int kWarpRowBlock = 256;

// How a row kernel covers `rows` rows of `cols` elements.
struct RowLaunch {
  bool warp_per_row = false;  // else one block per row (launch_rows)
  Launch launch;              // grid 0: nothing to launch
};

// Warp per row for short rows when they are many, block per row otherwise.
// Either way blocks loop over rows, so the grid stays capped (kMaxGrid).
RowLaunch plan_row_launch(int64_t rows, int64_t cols);

// A tensor seen as [outer, n, inner] around one of its dims.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};

// The split of `shape` at `dim` (0 <= dim < rank). A softmax over `dim` is a
// row softmax when inner == 1, else a strided one.
AxisSplit split_at(const std::vector<int64_t>& shape, size_t dim);

// A tensor seen as rows of its last dim: layer_norm's normalized rows,
// cross_entropy's logit rows. Rank 0 is one row of one element.
struct RowSplit {
  int64_t rows = 1, cols = 1;
};
RowSplit split_rows(const std::vector<int64_t>& shape);

// scaled_dot_product_attention over q [..., Tq, D], k [..., Tk, D],
// v [..., Tk, Dv] (contiguous; the meta function checked the shapes agree):
// `batch` = prod(...) matrices, run `group` at a time so the f32 scores of a
// group, group * Tq * Tk floats, stay within the budget (at least one
// matrix's worth whatever the budget). Steps are in elements between
// consecutive matrices of each operand.
struct AttentionPlan {
  int64_t batch = 0, tq = 0, tk = 0, d = 0, dv = 0;
  int64_t group = 0;  // matrices per chunk, 1 <= group <= batch (0 if batch is 0)
  int64_t q_step = 0, k_step = 0, v_step = 0, o_step = 0, s_step = 0;
  // Whether every size cuBLAS takes as an int (m, n, k, leading dims, the
  // batch count of a chunk) fits one.
  bool fits_int = true;
  // Nothing to compute: the output is empty.
  bool empty() const { return batch == 0 || tq == 0 || dv == 0; }
};
AttentionPlan plan_attention(const std::vector<int64_t>& q, const std::vector<int64_t>& k,
                             const std::vector<int64_t>& v, int64_t max_score_floats);

// The score budget the attention kernel plans with: 64 MiB of f32 scores
// (16 heads of 1024 x 1024), enough for cuBLAS to run full-size batches.
constexpr int64_t kAttentionScoreFloats = int64_t{16} << 20;

}  // namespace fsdpc::cuda
