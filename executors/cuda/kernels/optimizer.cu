// Device code of the optimizer updates and gradient utilities
// (optimizer.h): grid-stride elementwise kernels and a two-stage,
// fixed-order sum of squares. The double arithmetic uses the __d*_rn
// intrinsics so that it rounds exactly where runtime/optimizer.cpp does.
#include "executors/cuda/kernels/optimizer.h"

#include "executors/cuda/cuda_check.h"
#include "executors/cuda/launch.h"

namespace fsdpc::cuda {

namespace {

// Block size of the sum of squares' stages: a power of two (the tree below
// halves it), 8 resident blocks per SM as launch.h assumes.
constexpr int kReduceBlock = 256;

__global__ void sgd_kernel(float* __restrict__ p, const float* __restrict__ grad, float* __restrict__ buf,
                           int64_t n, double lr, double wd, double mu, bool first) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const double x = p[i];
    double g = __dadd_rn(static_cast<double>(grad[i]), __dmul_rn(wd, x));
    if (buf) {
      const double b = first ? g : __dadd_rn(__dmul_rn(mu, static_cast<double>(buf[i])), g);
      buf[i] = static_cast<float>(b);
      g = b;
    }
    p[i] = static_cast<float>(__dsub_rn(x, __dmul_rn(lr, g)));
  }
}

// one_minus_b1 = 1 - beta1 and one_minus_b2 = 1 - beta2, decay = 1 - lr * wd:
// the CPU's loop-invariant subexpressions, computed once on the host.
__global__ void adamw_kernel(float* __restrict__ p, const float* __restrict__ grad, float* __restrict__ m,
                             float* __restrict__ v, int64_t n, double decay, double b1, double one_minus_b1,
                             double b2, double one_minus_b2, double eps, double step_size, double bc2_sqrt) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const double g = grad[i];
    const double x = __dmul_rn(static_cast<double>(p[i]), decay);
    const double mi = __dadd_rn(__dmul_rn(b1, static_cast<double>(m[i])), __dmul_rn(one_minus_b1, g));
    const double vi = __dadd_rn(__dmul_rn(b2, static_cast<double>(v[i])), __dmul_rn(__dmul_rn(one_minus_b2, g), g));
    m[i] = static_cast<float>(mi);
    v[i] = static_cast<float>(vi);
    const double denom = __dadd_rn(__ddiv_rn(__dsqrt_rn(vi), bc2_sqrt), eps);
    p[i] = static_cast<float>(__dsub_rn(x, __ddiv_rn(__dmul_rn(step_size, mi), denom)));
  }
}

__global__ void add_into_kernel(float* __restrict__ dst, const float* __restrict__ src, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = __fadd_rn(dst[i], src[i]);
}

__global__ void scale_kernel(float* __restrict__ x, int64_t n, float s) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    x[i] = __fmul_rn(x[i], s);
}

// Sums one value per thread of a kReduceBlock-thread block in a fixed tree;
// thread 0 gets the total.
__device__ double block_sum(double value) {
  __shared__ double partial[kReduceBlock];
  partial[threadIdx.x] = value;
  __syncthreads();
  for (int half = kReduceBlock / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  return partial[0];
}

// Stage 1: block b sums the squares of the elements its threads visit (a
// grid-stride walk whose shape depends only on n and the grid) into
// partials[b].
__global__ void sum_squares_blocks(const float* __restrict__ x, int64_t n, double* __restrict__ partials) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  double acc = 0.0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const double xi = x[i];
    acc = __dadd_rn(acc, __dmul_rn(xi, xi));
  }
  const double total = block_sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

// Stage 2: one block adds the `count` partials and adds that to *out. A
// plain read-modify-write by one thread: stream order serialises callers.
__global__ void sum_squares_finish(const double* __restrict__ partials, int64_t count, double* out) {
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) acc = __dadd_rn(acc, partials[i]);
  const double total = block_sum(acc);
  if (threadIdx.x == 0) *out = __dadd_rn(*out, total);
}

}  // namespace

void launch_sgd_update(float* param, const float* grad, float* momentum_buf, int64_t n, const SgdStep& s,
                       cudaStream_t stream) {
  const Launch l = launch_1d(n);
  if (l.grid == 0) return;
  sgd_kernel<<<l.grid, l.block, 0, stream>>>(param, grad, momentum_buf, n, s.lr, s.weight_decay, s.momentum,
                                            s.first_step);
  FSDPC_CUDA_CHECK_LAUNCH();
}

void launch_adamw_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                         const AdamWStep& s, cudaStream_t stream) {
  const Launch l = launch_1d(n);
  if (l.grid == 0) return;
  // The same expressions as runtime/optimizer.cpp, evaluated once here.
  const double decay = 1.0 - s.lr * s.weight_decay;
  adamw_kernel<<<l.grid, l.block, 0, stream>>>(param, grad, exp_avg, exp_avg_sq, n, decay, s.beta1, 1.0 - s.beta1,
                                              s.beta2, 1.0 - s.beta2, s.eps, s.step_size, s.bias_correction2_sqrt);
  FSDPC_CUDA_CHECK_LAUNCH();
}

void launch_add_into(float* dst, const float* src, int64_t n, cudaStream_t stream) {
  const Launch l = launch_1d(n);
  if (l.grid == 0) return;
  add_into_kernel<<<l.grid, l.block, 0, stream>>>(dst, src, n);
  FSDPC_CUDA_CHECK_LAUNCH();
}

void launch_scale(float* x, int64_t n, float s, cudaStream_t stream) {
  const Launch l = launch_1d(n);
  if (l.grid == 0) return;
  scale_kernel<<<l.grid, l.block, 0, stream>>>(x, n, s);
  FSDPC_CUDA_CHECK_LAUNCH();
}

int64_t sum_squares_scratch_elems(int64_t n) { return launch_1d(n, kReduceBlock).grid; }

void launch_sum_squares(const float* x, int64_t n, double* out, double* scratch, cudaStream_t stream) {
  const Launch l = launch_1d(n, kReduceBlock);
  if (l.grid == 0) return;
  double* partials = scratch;
  if (!partials) {
    void* p = nullptr;
    FSDPC_CUDA_CHECK(cudaMallocAsync(&p, sizeof(double) * l.grid, stream));
    partials = static_cast<double*>(p);
  }
  sum_squares_blocks<<<l.grid, kReduceBlock, 0, stream>>>(x, n, partials);
  FSDPC_CUDA_CHECK_LAUNCH();
  sum_squares_finish<<<1, kReduceBlock, 0, stream>>>(partials, l.grid, out);
  FSDPC_CUDA_CHECK_LAUNCH();
  if (!scratch) FSDPC_CUDA_CHECK(cudaFreeAsync(partials, stream));
}

}  // namespace fsdpc::cuda
