// softmax with f32 arithmetic: per row one pass keeps a running max and a
// running sum of exp(x - max), rescaling the sum whenever the max grows
// (the "online" softmax), so the input is read twice, not three times, and
// every exponent is <= 0 as in the max-subtracted form; a second pass
// writes exp(x - max) / sum. Short rows get a warp each, long rows a block
// (nn_plan.h); a non-last dim gets a thread per column, whose loads are
// contiguous across the warp.
#include "executors/cuda/kernels/softmax.h"

#include <cmath>

#include "executors/cuda/cuda_check.h"
#include "executors/cuda/kernels/device_util.cuh"
#include "executors/cuda/launch.h"
#include "executors/cuda/nn_plan.h"

namespace fsdpc::cuda {

namespace {

constexpr float kNegInf = -INFINITY;

// A partial softmax: the max m of the elements seen and s = sum exp(x - m).
// No member initializers: it lives in __shared__ memory.
struct MaxSum {
  float m, s;
};

// Adds x. -inf (a masked score) adds nothing; a NaN adds NaN to s, so it
// poisons its row as it does on the CPU; m itself never becomes NaN.
__device__ __forceinline__ MaxSum push(MaxSum a, float x) {
  if (x > a.m) {
    a.s = a.s * expf(a.m - x) + 1.0f;  // exp(-inf) = 0 drops the empty start
    a.m = x;
  } else if (x != kNegInf) {
    a.s += expf(x - a.m);
  }
  return a;
}

// The merge of two partials for warp_reduce / block_reduce. Symmetric bit
// for bit (fmaxf, and + and * commute), so both lanes of a shuffle pair
// hold the same result and a whole row agrees on m and s.
struct MergeMaxSum {
  __device__ __forceinline__ MaxSum operator()(MaxSum a, MaxSum b) const {
    const float m = fmaxf(a.m, b.m);
    if (m == kNegInf) return {m, a.s + b.s};  // both empty: avoid exp(-inf + inf)
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
  }
};

// x and y may alias (attention's in-place f32 scores): a thread writes only
// the elements it read, and all of a row's first-pass reads finish before
// the reduction that precedes the writes.
template <class TIn, class TOut, bool kWarpRows>
__global__ void softmax_rows_kernel(const TIn* x, TOut* y, SoftmaxRows p) {
  const RowCursor c = row_cursor<kWarpRows>();
  for (int64_t row = c.first; row < p.rows; row += c.step) {
    const TIn* xr = x + row * p.cols;
    TOut* yr = y + row * p.cols;
    const int64_t query = p.causal ? row % p.rows_per_matrix : 0;
    const int64_t visible = p.causal && query + 1 < p.cols ? query + 1 : p.cols;
    MaxSum acc{kNegInf, 0.0f};
    // __fmul_rn: never contracted into an FMA, so both passes see the same z.
    for (int64_t j = c.rank; j < visible; j += c.size) acc = push(acc, __fmul_rn(p.scale, to_f32(xr[j])));
    if constexpr (kWarpRows)
      acc = warp_reduce(acc, MergeMaxSum{});
    else
      acc = block_reduce(acc, MergeMaxSum{}, MaxSum{kNegInf, 0.0f});
    for (int64_t j = c.rank; j < p.cols; j += c.size) {
      const float e = j < visible ? expf(__fmul_rn(p.scale, to_f32(xr[j])) - acc.m) / acc.s : 0.0f;
      yr[j] = from_f32<TOut>(e);
    }
  }
}

template <class T>
__global__ void softmax_strided_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t n,
                                       int64_t inner) {
  const int64_t columns = outer * inner, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < columns; c += stride) {
    const int64_t base = (c / inner) * n * inner + c % inner;
    MaxSum acc{kNegInf, 0.0f};
    for (int64_t j = 0; j < n; ++j) acc = push(acc, to_f32(x[base + j * inner]));
    for (int64_t j = 0; j < n; ++j)
      y[base + j * inner] = from_f32<T>(expf(to_f32(x[base + j * inner]) - acc.m) / acc.s);
  }
}

template <class TIn, class TOut>
void softmax_rows(const TIn* x, TOut* y, const SoftmaxRows& p, cudaStream_t stream) {
  FSDPC_CHECK(!p.causal || p.rows_per_matrix > 0) << "causal softmax with " << p.rows_per_matrix
                                                  << " rows per matrix";
  const RowLaunch r = plan_row_launch(p.rows, p.cols);
  if (r.launch.grid == 0) return;
  if (r.warp_per_row)
    softmax_rows_kernel<TIn, TOut, true><<<r.launch.grid, r.launch.block, 0, stream>>>(x, y, p);
  else
    softmax_rows_kernel<TIn, TOut, false><<<r.launch.grid, r.launch.block, 0, stream>>>(x, y, p);
  FSDPC_CUDA_CHECK_LAUNCH();
}

template <class T>
void softmax_strided(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, cudaStream_t stream) {
  if (n == 0) return;
  const Launch l = launch_1d(outer * inner);
  if (l.grid == 0) return;
  softmax_strided_kernel<T><<<l.grid, l.block, 0, stream>>>(x, y, outer, n, inner);
  FSDPC_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_softmax_rows(const float* x, float* y, const SoftmaxRows& p, cudaStream_t stream) {
  softmax_rows(x, y, p, stream);
}

void launch_softmax_rows(const __nv_bfloat16* x, __nv_bfloat16* y, const SoftmaxRows& p,
                         cudaStream_t stream) {
  softmax_rows(x, y, p, stream);
}

void launch_softmax_rows(const float* x, __nv_bfloat16* y, const SoftmaxRows& p, cudaStream_t stream) {
  softmax_rows(x, y, p, stream);
}

void launch_softmax_strided(const float* x, float* y, int64_t outer, int64_t n, int64_t inner,
                            cudaStream_t stream) {
  softmax_strided(x, y, outer, n, inner, stream);
}

void launch_softmax_strided(const __nv_bfloat16* x, __nv_bfloat16* y, int64_t outer, int64_t n, int64_t inner,
                            cudaStream_t stream) {
  softmax_strided(x, y, outer, n, inner, stream);
}

}  // namespace fsdpc::cuda
