// Launch functions of softmax (kernels/softmax.cu): max-subtracted, f32
// arithmetic whatever the storage, along the last dim (rows) or any other
// (strided columns). The row form also serves attention: a scale applied
// first and a top-left causal mask, in the same pass.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace fsdpc::cuda {

// `rows` contiguous rows of `cols` elements. Each row is softmax(scale * x);
// with `causal`, row r is query i = r % rows_per_matrix of its matrix and
// keeps columns j <= i, the rest written as 0 (what exp(-inf) gives).
struct SoftmaxRows {
  int64_t rows = 0, cols = 0;
  float scale = 1.0f;
  bool causal = false;
  int64_t rows_per_matrix = 1;  // Tq; read only when causal
};

// x and y may be the same buffer when their element types agree (in place).
void launch_softmax_rows(const float* x, float* y, const SoftmaxRows& p, cudaStream_t stream);
void launch_softmax_rows(const __nv_bfloat16* x, __nv_bfloat16* y, const SoftmaxRows& p,
                         cudaStream_t stream);
// Attention with bf16 operands: f32 scores in, bf16 probabilities out.
void launch_softmax_rows(const float* x, __nv_bfloat16* y, const SoftmaxRows& p, cudaStream_t stream);

// Softmax over the middle dim of [outer, n, inner] (inner > 1: a dim that is
// not the last). Separate buffers.
void launch_softmax_strided(const float* x, float* y, int64_t outer, int64_t n, int64_t inner,
                            cudaStream_t stream);
void launch_softmax_strided(const __nv_bfloat16* x, __nv_bfloat16* y, int64_t outer, int64_t n, int64_t inner,
                            cudaStream_t stream);

}  // namespace fsdpc::cuda
