// gelu, elementwise in f32: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) as
// the IR's decomposition and the CPU's oneDNN gelu_tanh (the IR has only
// approximate='tanh'). Accurate tanhf (the build keeps fast math off), so
// f32 results match the CPU to a few ulp.
#include "executors/cuda/kernels/gelu.h"

#include "executors/cuda/cuda_check.h"
#include "executors/cuda/kernels/device_util.cuh"
#include "executors/cuda/launch.h"

namespace fsdpc::cuda {

namespace {

__device__ __forceinline__ float gelu_tanh(float x) {
  constexpr float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
  constexpr float kKappa = 0.044715f;
  return 0.5f * x * (1.0f + tanhf(kBeta * (x + kKappa * x * x * x)));
}

// Grid-stride loop.
template <class T>
__global__ void gelu_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = to_f32(x[i]);
    y[i] = from_f32<T>(gelu_tanh(v));
  }
}

template <class T>
void gelu(const T* x, T* y, int64_t n, cudaStream_t stream) {
  const Launch l = launch_1d(n);
  if (l.grid == 0) return;
  gelu_kernel<T><<<l.grid, l.block, 0, stream>>>(x, y, n);
  FSDPC_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_gelu(const float* x, float* y, int64_t n, cudaStream_t stream) {
  gelu(x, y, n, stream);
}

void launch_gelu(const __nv_bfloat16* x, __nv_bfloat16* y, int64_t n, cudaStream_t stream) {
  gelu(x, y, n, stream);
}

}  // namespace fsdpc::cuda
