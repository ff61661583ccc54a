// rms_norm's forward with f32 statistics: one pass sums x² over the row
// (a warp per short row, a block per long one, nn_plan.h), then
// y = w * to_T(x * rstd), rounding where Hugging Face's LlamaRMSNorm does
// (the normalized row is cast to x's dtype before the weight multiplies it).
#include "executors/cuda/kernels/rms_norm.h"

#include "executors/cuda/cuda_check.h"
#include "executors/cuda/kernels/device_util.cuh"
#include "executors/cuda/launch.h"
#include "executors/cuda/nn_plan.h"

namespace fsdpc::cuda {

namespace {

// The merge for warp_reduce / block_reduce.
struct AddF {
  __device__ __forceinline__ float operator()(float x, float y) const { return x + y; }
};

template <bool kWarpRows>
__device__ __forceinline__ float row_sum(float v) {
  if constexpr (kWarpRows)
    return warp_reduce(v, AddF{});
  else
    return block_reduce(v, AddF{}, 0.0f);
}

// A warp per row (kWarpRows) or a block per row; the row loop's bounds are
// uniform over the group, so every member reaches each reduction.
template <class T, bool kWarpRows>
__global__ void rms_norm_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                int64_t rows, int64_t cols, float eps) {
  const RowCursor c = row_cursor<kWarpRows>();
  const int rank = c.rank, size = c.size;
  const float n = static_cast<float>(cols);
  for (int64_t row = c.first; row < rows; row += c.step) {
    const T* xr = x + row * cols;
    T* yr = y + row * cols;
    float s = 0.0f;
    for (int64_t j = rank; j < cols; j += size) {
      const float v = to_f32(xr[j]);
      s += v * v;
    }
    const float rstd = 1.0f / sqrtf(row_sum<kWarpRows>(s) / n + eps);  // IEEE: no rsqrtf's 2 ulp
    for (int64_t j = rank; j < cols; j += size) {
      const float normed = to_f32(from_f32<T>(to_f32(xr[j]) * rstd));
      yr[j] = from_f32<T>(to_f32(w[j]) * normed);
    }
  }
}

template <class T>
void rms_norm(const T* x, const T* w, T* y, int64_t rows, int64_t cols, float eps, cudaStream_t stream) {
  const RowLaunch r = plan_row_launch(rows, cols);
  if (r.launch.grid == 0) return;
  if (r.warp_per_row)
    rms_norm_kernel<T, true><<<r.launch.grid, r.launch.block, 0, stream>>>(x, w, y, rows, cols, eps);
  else
    rms_norm_kernel<T, false><<<r.launch.grid, r.launch.block, 0, stream>>>(x, w, y, rows, cols, eps);
  FSDPC_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t cols, float eps,
                     cudaStream_t stream) {
  rms_norm(x, w, y, rows, cols, eps, stream);
}

void launch_rms_norm(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, int64_t rows,
                     int64_t cols, float eps, cudaStream_t stream) {
  rms_norm(x, w, y, rows, cols, eps, stream);
}

}  // namespace fsdpc::cuda
