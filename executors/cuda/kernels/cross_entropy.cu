// cross_entropy in two kernels, without float atomics so a loss is the same
// run to run: one computes each row's logsumexp(z) - z[target] into scratch
// (a warp per short row, a block per long one: nn_plan.h), then a single
// block sums the rows in a fixed order, in double as the CPU does, and
// writes the mean.
//
// A row keeps its max m and the "rest" r = sum exp(z - m) over every
// element but one max (whose term is exactly 1), so logsumexp = m +
// log1p(r) (max_rest.cuh, shared with the fused head's kernels).
#include "executors/cuda/kernels/cross_entropy.h"

#include <cmath>

#include "executors/cuda/cuda_check.h"
#include "executors/cuda/kernels/device_util.cuh"
#include "executors/cuda/kernels/max_rest.cuh"
#include "executors/cuda/kernels/ordered_mean.cuh"
#include "executors/cuda/launch.h"
#include "executors/cuda/nn_plan.h"

namespace fsdpc::cuda {

namespace {

constexpr float kNegInf = -INFINITY;

// losses[row] = logsumexp(z) - z[target], NaN for a target out of range.
// The row loop's bounds are uniform over a warp (kWarpRows) or a block, so
// every member reaches each reduction.
template <class T, class TIdx, bool kWarpRows>
__global__ void row_loss_kernel(const T* __restrict__ logits, const TIdx* __restrict__ targets,
                                float* __restrict__ losses, int64_t rows, int64_t classes) {
  const RowCursor c = row_cursor<kWarpRows>();
  const int rank = c.rank, size = c.size;
  const int64_t step = c.step;
  int64_t row = c.first;
  for (; row < rows; row += step) {
    const T* z = logits + row * classes;
    MaxRest acc{kNegInf, 0.0f};
    for (int64_t j = rank; j < classes; j += size) acc = push_max_rest(acc, to_f32(z[j]));
    if constexpr (kWarpRows)
      acc = warp_reduce(acc, MergeMaxRest{});
    else
      acc = block_reduce(acc, MergeMaxRest{}, MaxRest{kNegInf, 0.0f});
    if (rank == 0) {
      const auto t = static_cast<int64_t>(targets[row]);
      losses[row] = t >= 0 && t < classes ? log1pf(acc.r) + (acc.m - to_f32(z[t])) : NAN;
    }
  }
}

template <class T, class TIdx>
void cross_entropy(const T* logits, const TIdx* targets, T* out, float* row_losses, int64_t rows,
                   int64_t classes, cudaStream_t stream) {
  FSDPC_CHECK(rows >= 0 && classes >= 0) << "cross_entropy of " << rows << "x" << classes;
  // No classes: every target is out of range, every loss NaN (the kernel
  // would read no logits).
  const RowLaunch r = plan_row_launch(rows, classes > 0 ? classes : 1);
  if (r.launch.grid != 0) {
    if (r.warp_per_row)
      row_loss_kernel<T, TIdx, true>
          <<<r.launch.grid, r.launch.block, 0, stream>>>(logits, targets, row_losses, rows, classes);
    else
      row_loss_kernel<T, TIdx, false>
          <<<r.launch.grid, r.launch.block, 0, stream>>>(logits, targets, row_losses, rows, classes);
    FSDPC_CUDA_CHECK_LAUNCH();
  }
  ordered_mean_kernel<float, T><<<1, kOrderedMeanBlock, 0, stream>>>(row_losses, out, rows);
  FSDPC_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_cross_entropy(const float* logits, const int32_t* targets, float* out, float* row_losses,
                          int64_t rows, int64_t classes, cudaStream_t stream) {
  cross_entropy(logits, targets, out, row_losses, rows, classes, stream);
}

void launch_cross_entropy(const float* logits, const int64_t* targets, float* out, float* row_losses,
                          int64_t rows, int64_t classes, cudaStream_t stream) {
  cross_entropy(logits, targets, out, row_losses, rows, classes, stream);
}

void launch_cross_entropy(const __nv_bfloat16* logits, const int32_t* targets, __nv_bfloat16* out,
                          float* row_losses, int64_t rows, int64_t classes, cudaStream_t stream) {
  cross_entropy(logits, targets, out, row_losses, rows, classes, stream);
}

void launch_cross_entropy(const __nv_bfloat16* logits, const int64_t* targets, __nv_bfloat16* out,
                          float* row_losses, int64_t rows, int64_t classes, cudaStream_t stream) {
  cross_entropy(logits, targets, out, row_losses, rows, classes, stream);
}

}  // namespace fsdpc::cuda
