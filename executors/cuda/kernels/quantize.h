// Launch functions of quantize and dequantize (kernels/quantize.cu):
// ir/quantize.h's int8 rows of `rows` rows of n values in blocks of `block`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace fsdpc::cuda {

// q holds rows * quantized_row_bytes(n, block) bytes. A block holding NaN or
// an infinity gets a NaN scale (and codes 0), so that it dequantizes to NaN:
// a kernel cannot stop the host, and the step's loss then shows it.
void launch_quantize(const float* x, int8_t* q, int64_t rows, int64_t n, int64_t block, cudaStream_t stream);
void launch_quantize(const __nv_bfloat16* x, int8_t* q, int64_t rows, int64_t n, int64_t block,
                     cudaStream_t stream);

void launch_dequantize(const int8_t* q, float* y, int64_t rows, int64_t n, int64_t block, cudaStream_t stream);
void launch_dequantize(const int8_t* q, __nv_bfloat16* y, int64_t rows, int64_t n, int64_t block,
                       cudaStream_t stream);

}  // namespace fsdpc::cuda
