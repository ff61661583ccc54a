// Optimizer updates and gradient utilities on flat f32 shards in device
// memory, for the runtime's CUDA path: launch functions only (device code in
// optimizer.cu). Every launch goes on `stream`, never synchronises the host,
// and is a no-op for n == 0.
//
// Parity with runtime/optimizer.cpp and runtime/clip.cpp: the updates do
// the CPU's arithmetic in double, operation for operation and in the same
// order, with IEEE round-to-nearest intrinsics so nvcc cannot contract a
// multiply and an add into an FMA (the CPU build does not either), and round
// to float only where the CPU stores. Results are then bit-identical to the
// CPU's given the same inputs and the same host-computed scalars:
//   SGD:   g = grad + wd * p;  with momentum b = first ? g : mu * b + g,
//          store b, g = b;  p = p - lr * g.
//   AdamW: x = p * (1 - lr * wd);  m = b1 * m + (1 - b1) * g;
//          v = b2 * v + ((1 - b2) * g) * g;  store m, v (as float);
//          p = x - (step_size * m) / (sqrt(v) / bias_correction2_sqrt + eps)
//          with m and v the unrounded doubles.
// The host computes, exactly as runtime/optimizer.cpp does, for the
// parameter's step count t (starting at 1):
//   step_size = lr / (1.0 - std::pow(beta1, t));
//   bias_correction2_sqrt = std::sqrt(1.0 - std::pow(beta2, t)).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fsdpc::cuda {

struct SgdStep {
  double lr = 0, weight_decay = 0, momentum = 0;
  // The parameter's first step: the momentum buffer becomes a copy of the
  // (decayed) gradient instead of mu * buf + g, as in torch.
  bool first_step = false;
};

// One SGD step of param[0, n). `momentum_buf` is null exactly when the
// optimizer keeps no buffer (momentum == 0, as the CPU allocates none).
void launch_sgd_update(float* param, const float* grad, float* momentum_buf, int64_t n, const SgdStep& s,
                       cudaStream_t stream);

struct AdamWStep {
  double lr = 0, weight_decay = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double step_size = 0;              // lr / (1 - beta1^t)
  double bias_correction2_sqrt = 1;  // sqrt(1 - beta2^t)
};

// One AdamW step of param[0, n) with its exp_avg and exp_avg_sq buffers.
void launch_adamw_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                         const AdamWStep& s, cudaStream_t stream);

// dst[i] += src[i] in float (gradient accumulation).
void launch_add_into(float* dst, const float* src, int64_t n, cudaStream_t stream);

// x[i] *= s in float: clip_grad_norm's scaling by a float coefficient.
void launch_scale(float* x, int64_t n, float s, cudaStream_t stream);

// Doubles of scratch launch_sum_squares needs for n elements: one per block
// of its first stage (at most kMaxGrid, launch.h). 0 for n == 0.
int64_t sum_squares_scratch_elems(int64_t n);

// *out += sum of x[i]^2, squares and sums in double (a float's square is
// exact in double). Deterministic: each block sums a fixed set of elements
// in a fixed order into scratch[block], then one block adds the partials in
// a fixed order and a single thread adds the total to *out; the grouping
// depends only on n, so the same data gives the same bits on every run (but
// not the CPU's left-to-right bits: the additions are grouped differently).
// `out` and `scratch` are device memory; scratch holds
// sum_squares_scratch_elems(n) doubles, or is null to borrow them from the
// stream-ordered allocator (cudaMallocAsync / cudaFreeAsync on `stream`).
void launch_sum_squares(const float* x, int64_t n, double* out, double* scratch, cudaStream_t stream);

}  // namespace fsdpc::cuda
