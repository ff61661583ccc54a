// Launch functions of layer_norm's forward (kernels/layer_norm.cu): each of
// `rows` contiguous rows of `cols` elements normalized by its own mean and
// biased variance, then scaled by w and shifted by b (both [cols], the
// storage type of x). f32 arithmetic whatever the storage.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace fsdpc::cuda {

// y = (x - mean) / sqrt(var + eps) * w + b per row; nothing is launched
// for an empty tensor.
void launch_layer_norm(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols,
                       float eps, cudaStream_t stream);
void launch_layer_norm(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* b,
                       __nv_bfloat16* y, int64_t rows, int64_t cols, float eps, cudaStream_t stream);

}  // namespace fsdpc::cuda
