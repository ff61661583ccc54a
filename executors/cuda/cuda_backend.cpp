// The CUDA DeviceBackend (cuda_backend.h). Copies to the host wait for the
// compute stream (a loss, a checkpoint); copies from the host are queued on
// it and then waited for, because the caller's host buffer may be freed as
// soon as the call returns. Every such wait, and every free, goes through
// the context's polling wait (CudaContext::wait_idle), so a hung collective
// ends the job under the NCCL watchdog instead of blocking here.
#include "executors/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdint>

#include "executors/cuda/cuda_check.h"
#include "executors/cuda/kernels/optimizer.h"
#include "ir/error.h"

namespace fsdpc::cuda {

namespace {

class CudaBackend final : public DeviceBackend, public ScratchUser {
 public:
  explicit CudaBackend(CudaContext& ctx) : ctx_(ctx) {}
  ~CudaBackend() override {
    if (own_scratch_) {
      ctx_.before_free();
      (void)cudaFree(own_scratch_);
    }
  }

  // The allocator built on this backend lends the kernels their scratch.
  void use_scratch(ScratchPool* pool) override {
    norm_scratch_.reset();  // from the pool being detached
    norm_scratch_bytes_ = 0;
    ctx_.use_scratch_pool(pool);
    pool_ = pool;
  }

  Device device() const override { return Device{DeviceKind::cuda, ctx_.device()}; }
  // cudaMalloc's own alignment; vectorised kernels need 16 bytes.
  size_t alignment() const override { return 256; }

  void* allocate(size_t bytes) override {
    void* p = nullptr;
    cudaError_t rc = cudaMalloc(&p, bytes);
    if (rc == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear the error: the allocator reports it
      // The default pool keeps what stream-ordered scratch freed (its
      // release threshold is raised): give that back and try once more.
      ctx_.wait_idle(CudaContext::Streams::both, "the device's work before trimming its memory pool");
      cudaMemPool_t pool = nullptr;
      FSDPC_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, ctx_.device()));
      FSDPC_CUDA_CHECK(cudaMemPoolTrimTo(pool, 0));
      rc = cudaMalloc(&p, bytes);
      if (rc == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return nullptr;
      }
    }
    FSDPC_CUDA_CHECK(rc);
    return p;
  }
  // cudaFree waits for the whole device, without a deadline, so the streams
  // are first brought to rest through the polling wait (a block is never
  // freed under a kernel still using it). The allocator frees when it drops
  // its cache: at the end, or mid-step when cudaMalloc fails and the cache
  // may make room.
  void deallocate(void* p) override {
    ctx_.before_free();
    FSDPC_CUDA_CHECK(cudaFree(p));
  }
  void zero(void* p, size_t bytes) override {
    if (bytes) FSDPC_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, ctx_.compute()));
  }

  void copy_from_host(void* dst, const void* src, size_t bytes) override {
    if (!bytes) return;
    FSDPC_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx_.compute()));
    ctx_.wait_idle(CudaContext::Streams::compute, "a copy from the host");
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    if (!bytes) return;
    FSDPC_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx_.compute()));
    ctx_.wait_idle(CudaContext::Streams::compute, "a copy to the host (a loss, parameters)");
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes) FSDPC_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx_.compute()));
  }

  void add_into(float* dst, const float* src, int64_t n) override {
    launch_add_into(dst, src, n, ctx_.compute());
  }
  void scale(float* x, int64_t n, float s) override { launch_scale(x, n, s, ctx_.compute()); }

  // Every launch adds into one device double; the partials' scratch is
  // reused launch after launch (they are ordered on the stream).
  double sum_squares(const std::vector<Span>& xs) override {
    int64_t most = 0;
    for (const Span& x : xs) most = std::max(most, x.n);
    if (most == 0) return 0;
    // One double result after the block partials: [0] the sum, then scratch.
    const size_t need = (1 + static_cast<size_t>(sum_squares_scratch_elems(most))) * sizeof(double);
    double* result = static_cast<double*>(norm_scratch(need));
    FSDPC_CUDA_CHECK(cudaMemsetAsync(result, 0, sizeof(double), ctx_.compute()));
    for (const Span& x : xs) launch_sum_squares(x.data, x.n, result, result + 1, ctx_.compute());
    double host = 0;
    FSDPC_CUDA_CHECK(cudaMemcpyAsync(&host, result, sizeof host, cudaMemcpyDeviceToHost, ctx_.compute()));
    ctx_.wait_idle(CudaContext::Streams::compute, "the gradients' sum of squares (clipping)");
    return host;
  }

  void sgd_update(float* param, const float* grad, float* buf, int64_t n, const ::fsdpc::SgdStep& s) override {
    SgdStep k;
    k.lr = s.lr;
    k.weight_decay = s.weight_decay;
    k.momentum = s.momentum;
    k.first_step = s.first;
    fold_grad_scale(grad, n, s.grad_scale);
    launch_sgd_update(param, grad, buf, n, k, ctx_.compute());
  }
  void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n,
                    const ::fsdpc::AdamwStep& s) override {
    AdamWStep k;
    k.lr = s.lr;
    k.weight_decay = s.weight_decay;
    k.beta1 = s.beta1;
    k.beta2 = s.beta2;
    k.eps = s.eps;
    k.step_size = s.step_size;
    k.bias_correction2_sqrt = s.bias_correction2_sqrt;
    fold_grad_scale(grad, n, s.grad_scale);
    if (s.first) {  // the kernel reads the moments: give it their zeros
      zero(m, static_cast<size_t>(n) * sizeof(float));
      zero(v, static_cast<size_t>(n) * sizeof(float));
    }
    launch_adamw_update(param, grad, m, v, n, k, ctx_.compute());
  }

  void synchronize() override { ctx_.synchronize(); }

 private:
  // Clipping's coefficient as its own pass over the gradient, as before the
  // CPU folded it into the update (the engine owns the gradient buffers and
  // frees them after the step).
  void fold_grad_scale(const float* grad, int64_t n, float c) {
    if (c != 1.0f) launch_scale(const_cast<float*>(grad), n, c, ctx_.compute());
  }

 private:
  // sum_squares' result and partials, kept for the next step (the pool
  // accounts it as an activation while held); the backend's own cudaMalloc
  // when no allocator lends scratch.
  void* norm_scratch(size_t need) {
    if (pool_) {
      if (need > norm_scratch_bytes_) {
        norm_scratch_.reset();
        norm_scratch_ = pool_->scratch(need, false);
        norm_scratch_bytes_ = need;
      }
      return norm_scratch_.get();
    }
    if (need > own_scratch_bytes_) {
      if (own_scratch_) deallocate(own_scratch_);
      own_scratch_ = nullptr;
      own_scratch_ = allocate(need);
      if (!own_scratch_) fail("out of memory on cuda:", ctx_.device(), " allocating the clipping norm's scratch");
      own_scratch_bytes_ = need;
    }
    return own_scratch_;
  }

  CudaContext& ctx_;
  ScratchPool* pool_ = nullptr;
  std::shared_ptr<void> norm_scratch_;
  size_t norm_scratch_bytes_ = 0;
  void* own_scratch_ = nullptr;
  size_t own_scratch_bytes_ = 0;
};

}  // namespace

std::unique_ptr<DeviceBackend> make_cuda_backend(CudaContext& context) {
  return std::make_unique<CudaBackend>(context);
}

}  // namespace fsdpc::cuda
