// The mean of per-row losses as cross_entropy (cross_entropy.cu) and the
// fused head (linear_cross_entropy.cu) take it: one block of
// kOrderedMeanBlock threads, strided partial sums in double, a butterfly
// per warp, then thread 0 adds the warps' sums in order. No float atomics
// and a fixed thread count, so the mean is the same run to run and device
// to device. No rows: 0 / 0, NaN, as the CPU and the reference give.
// Device code: .cu files only.
#pragma once

#include <cstdint>

#include "executors/cuda/kernels/device_util.cuh"

namespace fsdpc::cuda {

inline constexpr int kOrderedMeanBlock = 256;

// Launch as <<<1, kOrderedMeanBlock>>>: out[0] = mean of losses[0 .. rows).
template <class In, class Out>
__global__ void ordered_mean_kernel(const In* __restrict__ losses, Out* __restrict__ out, int64_t rows) {
  __shared__ double partial[kOrderedMeanBlock / kWarp];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < rows; i += kOrderedMeanBlock) s += static_cast<double>(losses[i]);
  s = warp_reduce(s, [](double a, double b) { return a + b; });
  if (threadIdx.x % kWarp == 0) partial[threadIdx.x / kWarp] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int w = 0; w < kOrderedMeanBlock / kWarp; ++w) total += partial[w];
    out[0] = from_f32<Out>(static_cast<float>(total / static_cast<double>(rows)));
  }
}

}  // namespace fsdpc::cuda
