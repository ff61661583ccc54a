// Launch functions of silu (kernels/silu.cu): elementwise, f32 arithmetic
// whatever the storage.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace fsdpc::cuda {

// y[i] = x[i] * sigmoid(x[i]) for i < n; nothing is launched when n is 0.
void launch_silu(const float* x, float* y, int64_t n, cudaStream_t stream);
void launch_silu(const __nv_bfloat16* x, __nv_bfloat16* y, int64_t n, cudaStream_t stream);

}  // namespace fsdpc::cuda
