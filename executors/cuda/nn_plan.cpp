// Host-side planning of the nn kernels (nn_plan.h).
#include "executors/cuda/nn_plan.h"

#include <algorithm>
#include <limits>

#include "ir/error.h"

namespace fsdpc::cuda {

namespace {

int64_t product(const std::vector<int64_t>& shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= shape[i];
  return p;
}

}  // namespace

RowLaunch plan_row_launch(int64_t rows, int64_t cols) {
  FSDPC_CHECK(rows >= 0 && cols >= 0) << "negative row shape " << rows << "x" << cols;
  if (rows == 0 || cols == 0) return {};
  if (cols <= kWarpRowMaxCols && rows >= kWarpRowMinRows)
    return {true, launch_1d(rows * kWarp, kWarpRowBlock)};
  return {false, launch_rows(rows, cols)};
}

AxisSplit split_at(const std::vector<int64_t>& shape, size_t dim) {
  FSDPC_CHECK(dim < shape.size()) << "dim " << dim << " out of range for rank " << shape.size();
  return {product(shape, 0, dim), shape[dim], product(shape, dim + 1, shape.size())};
}

RowSplit split_rows(const std::vector<int64_t>& shape) {
  if (shape.empty()) return {};
  return {product(shape, 0, shape.size() - 1), shape.back()};
}

AttentionPlan plan_attention(const std::vector<int64_t>& q, const std::vector<int64_t>& k,
                             const std::vector<int64_t>& v, int64_t max_score_floats) {
  const size_t r = q.size();
  FSDPC_CHECK(r >= 2 && k.size() == r && v.size() == r) << "attention operands of ranks " << r << ", "
                                                        << k.size() << ", " << v.size();
  AttentionPlan p;
  p.batch = product(q, 0, r - 2);
  p.tq = q[r - 2];
  p.d = q[r - 1];
  p.tk = k[r - 2];
  p.dv = v[r - 1];
  p.q_step = p.tq * p.d;
  p.k_step = p.tk * p.d;
  p.v_step = p.tk * p.dv;
  p.o_step = p.tq * p.dv;
  p.s_step = p.tq * p.tk;
  if (p.batch > 0) {
    const int64_t per_matrix = std::max<int64_t>(p.s_step, 1);
    p.group = std::clamp<int64_t>(max_score_floats / per_matrix, 1, p.batch);
  }
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  p.fits_int = p.tq <= kIntMax && p.tk <= kIntMax && p.d <= kIntMax && p.dv <= kIntMax && p.group <= kIntMax;
  return p;
}

}  // namespace fsdpc::cuda
