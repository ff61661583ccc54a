// Launch functions of rms_norm's forward (kernels/rms_norm.cu): each of
// `rows` contiguous rows of `cols` elements scaled by the reciprocal root of
// its mean square, then by w ([cols], the storage type of x). f32
// arithmetic whatever the storage, as Hugging Face's LlamaRMSNorm.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace fsdpc::cuda {

// y = w * (x / sqrt(mean(x^2) + eps)) per row; nothing is launched for an
// empty tensor.
void launch_rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t cols, float eps,
                     cudaStream_t stream);
void launch_rms_norm(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, int64_t rows,
                     int64_t cols, float eps, cudaStream_t stream);

}  // namespace fsdpc::cuda
