// silu, elementwise in f32: x / (1 + exp(-x)), as the IR's decomposition
// writes x * sigmoid(x). Accurate expf (the build keeps fast math off); for
// x below about -88, exp(-x) is inf and the result the correct -0.
#include "executors/cuda/kernels/silu.h"

#include "executors/cuda/cuda_check.h"
#include "executors/cuda/kernels/device_util.cuh"
#include "executors/cuda/launch.h"

namespace fsdpc::cuda {

namespace {

// Grid-stride loop.
template <class T>
__global__ void silu_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = to_f32(x[i]);
    y[i] = from_f32<T>(v / (1.0f + expf(-v)));
  }
}

template <class T>
void silu(const T* x, T* y, int64_t n, cudaStream_t stream) {
  const Launch l = launch_1d(n);
  if (l.grid == 0) return;
  silu_kernel<T><<<l.grid, l.block, 0, stream>>>(x, y, n);
  FSDPC_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_silu(const float* x, float* y, int64_t n, cudaStream_t stream) { silu(x, y, n, stream); }

void launch_silu(const __nv_bfloat16* x, __nv_bfloat16* y, int64_t n, cudaStream_t stream) {
  silu(x, y, n, stream);
}

}  // namespace fsdpc::cuda
