// Launch functions of gelu (kernels/gelu.cu): elementwise, f32 arithmetic
// whatever the storage.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace fsdpc::cuda {

// y[i] = gelu(x[i]) for i < n, PyTorch's approximate='tanh' (the only form
// the IR's meta accepts); nothing is launched when n is 0.
void launch_gelu(const float* x, float* y, int64_t n, cudaStream_t stream);
void launch_gelu(const __nv_bfloat16* x, __nv_bfloat16* y, int64_t n, cudaStream_t stream);

}  // namespace fsdpc::cuda
