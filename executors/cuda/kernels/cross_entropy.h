// Launch functions of cross_entropy (kernels/cross_entropy.cu): the mean
// over `rows` positions of -log_softmax(logits[row])[targets[row]], logits
// [rows, classes] contiguous, f32 arithmetic whatever the storage.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace fsdpc::cuda {

// Writes the mean loss to out[0] (the output's storage type). `row_losses`
// is scratch of at least `rows` floats on the stream's device: each row's
// loss goes there and a second, single-block kernel sums them in a fixed
// order, so the result is the same run to run. A target outside
// [0, classes) makes its row's loss, and so the mean, NaN: the host cannot
// see the targets without synchronising. With no rows the mean is NaN
// (0 / 0), as on the CPU and the reference.
void launch_cross_entropy(const float* logits, const int32_t* targets, float* out, float* row_losses,
                          int64_t rows, int64_t classes, cudaStream_t stream);
void launch_cross_entropy(const float* logits, const int64_t* targets, float* out, float* row_losses,
                          int64_t rows, int64_t classes, cudaStream_t stream);
void launch_cross_entropy(const __nv_bfloat16* logits, const int32_t* targets, __nv_bfloat16* out,
                          float* row_losses, int64_t rows, int64_t classes, cudaStream_t stream);
void launch_cross_entropy(const __nv_bfloat16* logits, const int64_t* targets, __nv_bfloat16* out,
                          float* row_losses, int64_t rows, int64_t classes, cudaStream_t stream);

}  // namespace fsdpc::cuda
