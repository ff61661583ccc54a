// The CUDA DeviceBackend (cuda_backend.h). Copies to the host synchronise the
// compute stream (a loss, a checkpoint); copies from the host are queued on
// it and then waited for, because the caller's host buffer may be freed as
// soon as the call returns.
#include "executors/cuda/cuda_backend.h"

#include <algorithm>

#include "executors/cuda/cuda_check.h"
#include "executors/cuda/kernels/optimizer.h"

namespace fsdpc::cuda {

namespace {

class CudaBackend final : public DeviceBackend {
 public:
  explicit CudaBackend(CudaContext& ctx) : ctx_(ctx) {}
  ~CudaBackend() override {
    if (scratch_) (void)cudaFree(scratch_);
  }

  Device device() const override { return Device{DeviceKind::cuda, ctx_.device()}; }
  // cudaMalloc's own alignment; vectorised kernels need 16 bytes.
  size_t alignment() const override { return 256; }

  void* allocate(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t rc = cudaMalloc(&p, bytes);
    if (rc == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear the sticky-free error: the allocator reports it
      return nullptr;
    }
    FSDPC_CUDA_CHECK(rc);
    return p;
  }
  // cudaFree waits for the device, so a block is never freed under a kernel
  // still using it. The allocator calls it when it drops its cache: at the
  // end, or mid-step when cudaMalloc fails and the cache may make room.
  void deallocate(void* p) override { FSDPC_CUDA_CHECK(cudaFree(p)); }
  void zero(void* p, size_t bytes) override {
    if (bytes) FSDPC_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, ctx_.compute()));
  }

  void copy_from_host(void* dst, const void* src, size_t bytes) override {
    if (!bytes) return;
    FSDPC_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx_.compute()));
    FSDPC_CUDA_CHECK(cudaStreamSynchronize(ctx_.compute()));
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    if (!bytes) return;
    FSDPC_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx_.compute()));
    FSDPC_CUDA_CHECK(cudaStreamSynchronize(ctx_.compute()));
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
    if (need > scratch_bytes_) {
      if (scratch_) FSDPC_CUDA_CHECK(cudaFree(scratch_));
      FSDPC_CUDA_CHECK(cudaMalloc(&scratch_, need));
      scratch_bytes_ = need;
    }
    double* result = static_cast<double*>(scratch_);
    FSDPC_CUDA_CHECK(cudaMemsetAsync(result, 0, sizeof(double), ctx_.compute()));
    for (const Span& x : xs) launch_sum_squares(x.data, x.n, result, result + 1, ctx_.compute());
    double host = 0;
    FSDPC_CUDA_CHECK(cudaMemcpyAsync(&host, result, sizeof host, cudaMemcpyDeviceToHost, ctx_.compute()));
    FSDPC_CUDA_CHECK(cudaStreamSynchronize(ctx_.compute()));
    return host;
  }

  void sgd_update(float* param, const float* grad, float* buf, int64_t n, const ::fsdpc::SgdStep& s) override {
    SgdStep k;
    k.lr = s.lr;
    k.weight_decay = s.weight_decay;
    k.momentum = s.momentum;
    k.first_step = s.first;
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
    launch_adamw_update(param, grad, m, v, n, k, ctx_.compute());
  }

  void synchronize() override { ctx_.synchronize(); }

 private:
  CudaContext& ctx_;
  void* scratch_ = nullptr;  // sum_squares' result and partials
  size_t scratch_bytes_ = 0;
};

}  // namespace

std::unique_ptr<DeviceBackend> make_cuda_backend(CudaContext& context) {
  return std::make_unique<CudaBackend>(context);
}

}  // namespace fsdpc::cuda
