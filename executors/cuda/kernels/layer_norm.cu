// layer_norm's forward with f32 statistics, by the corrected two-pass
// algorithm: pass 1 sums the row for a first mean `hi`; pass 2 sums
// d = x - hi and d² together, whose mean `lo` corrects hi's rounding; the
// variance is mean(d²) - lo². The output is ((x - hi) - lo) * rstd, so a
// near-constant row, where rstd reaches 1/sqrt(eps), keeps nearly the
// precision of the CPU's double statistics (an f32 mean alone is off by
// half an ulp of the mean, which rstd amplifies ~300x). The row is re-read
// from cache in each pass. Short rows get a warp each, long rows a block
// (nn_plan.h).
#include "executors/cuda/kernels/layer_norm.h"

#include "executors/cuda/cuda_check.h"
#include "executors/cuda/kernels/device_util.cuh"
#include "executors/cuda/launch.h"
#include "executors/cuda/nn_plan.h"

namespace fsdpc::cuda {

namespace {

// Two sums reduced at once (pass 2's); pass 1 leaves `b` at 0. No member
// initializers: it lives in __shared__ memory.
struct Sums {
  float a, b;
};

// The merge for warp_reduce / block_reduce. Addition commutes bit for bit,
// so both lanes of a shuffle pair, and at the end the whole row, hold the
// same sums.
struct AddSums {
  __device__ __forceinline__ Sums operator()(Sums x, Sums y) const { return {x.a + y.a, x.b + y.b}; }
};

// The sums over the row's group: its warp, or its block (every thread of
// which must call it).
template <bool kWarpRows>
__device__ __forceinline__ Sums row_reduce(Sums v) {
  if constexpr (kWarpRows)
    return warp_reduce(v, AddSums{});
  else
    return block_reduce(v, AddSums{}, Sums{0.0f, 0.0f});
}

// A warp per row (kWarpRows) or a block per row; either way the row loop's
// bounds are uniform over the group, so every member reaches each
// reduction.
template <class T, bool kWarpRows>
__global__ void layer_norm_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                                  T* __restrict__ y, int64_t rows, int64_t cols, float eps) {
  const RowCursor c = row_cursor<kWarpRows>();
  const int rank = c.rank, size = c.size;
  const int64_t step = c.step;
  int64_t row = c.first;
  const float n = static_cast<float>(cols);
  for (; row < rows; row += step) {
    const T* xr = x + row * cols;
    T* yr = y + row * cols;
    Sums s{0.0f, 0.0f};
    for (int64_t j = rank; j < cols; j += size) s.a += to_f32(xr[j]);
    const float hi = row_reduce<kWarpRows>(s).a / n;
    Sums d{0.0f, 0.0f};
    for (int64_t j = rank; j < cols; j += size) {
      const float t = to_f32(xr[j]) - hi;
      d.a += t;
      d.b += t * t;
    }
    d = row_reduce<kWarpRows>(d);
    const float lo = d.a / n;
    const float var = fmaxf(d.b / n - lo * lo, 0.0f);
    const float rstd = 1.0f / sqrtf(var + eps);  // IEEE sqrt and division: no rsqrtf's 2 ulp
    for (int64_t j = rank; j < cols; j += size) {
      const float centred = (to_f32(xr[j]) - hi) - lo;
      yr[j] = from_f32<T>(centred * rstd * to_f32(w[j]) + to_f32(b[j]));
    }
  }
}

template <class T>
void layer_norm(const T* x, const T* w, const T* b, T* y, int64_t rows, int64_t cols, float eps,
                cudaStream_t stream) {
  const RowLaunch r = plan_row_launch(rows, cols);
  if (r.launch.grid == 0) return;
  if (r.warp_per_row)
    layer_norm_kernel<T, true><<<r.launch.grid, r.launch.block, 0, stream>>>(x, w, b, y, rows, cols, eps);
  else
    layer_norm_kernel<T, false><<<r.launch.grid, r.launch.block, 0, stream>>>(x, w, b, y, rows, cols, eps);
  FSDPC_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_layer_norm(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols,
                       float eps, cudaStream_t stream) {
  layer_norm(x, w, b, y, rows, cols, eps, stream);
}

void launch_layer_norm(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* b,
                       __nv_bfloat16* y, int64_t rows, int64_t cols, float eps, cudaStream_t stream) {
  layer_norm(x, w, b, y, rows, cols, eps, stream);
}

}  // namespace fsdpc::cuda
