// Launch functions of the fused head's row kernels
// (kernels/linear_cross_entropy.cu): what cuda_head.cpp runs on each chunk
// of f32 logits z [n, v] after cuBLASLt has written them, before (for a
// backward) the products that turn the cotangent into dh and dw.
//
// Targets out of range: the host cannot see them without synchronising the
// device, so, as cross_entropy's kernel does (cross_entropy.h), a row whose
// target lies outside [0, classes) is poisoned instead: its loss (lse and
// target logit, for a slice) is NaN, and in a backward its whole row of the
// cotangent, so dh's row and all of dw are NaN. The CPU refuses such
// targets with a message (checked_targets); a GPU run shows NaN.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fsdpc::cuda {

// An integer tensor read by the kernels, i32 or i64 as stored.
struct HeadIndex {
  const void* data = nullptr;
  bool i64 = false;
};

// One chunk's logits, rows r0 .. r0 + n - 1 of the batch; the row operands
// (targets, losses, lse, ...) are passed already advanced to row r0.
struct HeadChunk {
  const float* z = nullptr;  // [n, v], f32 as cuBLASLt accumulated them
  int64_t n = 0, v = 0;
  // The head's operands are bf16: each logit is rounded to bf16 as read,
  // the value the decomposition's bf16 linear holds.
  bool round_bf16 = false;
  HeadIndex targets;  // [n]
};

// The cotangent a backward writes, [n, v]: f32 (possibly z itself, in
// place) or bf16 (what bf16 products read).
struct HeadOut {
  void* data = nullptr;
  bool bf16 = false;
};

// A tensor-parallel rank's vocabulary slice: its first class is the device
// scalar offset[0]; classes from `vocab` on are padding.
struct HeadSlice {
  HeadIndex offset;
  int64_t vocab = 0;
};

// linear_cross_entropy: losses[r] = logsumexp(z[r]) - z[r][target], in f64.
void launch_head_losses(const HeadChunk& c, double* losses, cudaStream_t stream);

// out[0] = the mean of losses[0 .. rows), summed in a fixed order by one
// block (the same result run to run); no rows gives NaN (0 / 0).
void launch_head_mean(const double* losses, int64_t rows, float* out, cudaStream_t stream);

// linear_cross_entropy_grad: dz = (softmax(z) - onehot(target)) * g[0] / rows,
// g the device scalar cotangent of the loss, rows the whole batch's.
void launch_head_softmax_grad(const HeadChunk& c, const float* g, int64_t rows, const HeadOut& dz,
                              cudaStream_t stream);

// linear_cross_entropy_stats: per row over the slice's real classes
// lse = m + log1p(rest) (-inf with none), and tl = the target's logit where
// the slice holds the target, else 0.
void launch_head_slice_stats(const HeadChunk& c, const HeadSlice& s, float* lse, float* tl, cudaStream_t stream);

// linear_cross_entropy_stats_grad: dz = dlse * exp(z - lse) over the real
// classes, 0 over the padding, + dtl at the target where the slice holds it.
void launch_head_slice_grad(const HeadChunk& c, const HeadSlice& s, const float* lse, const float* dlse,
                            const float* dtl, const HeadOut& dz, cudaStream_t stream);

}  // namespace fsdpc::cuda
