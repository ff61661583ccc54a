// The CPU's DeviceBackend: host memory and the training step's loops.
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "executors/cpu/cpu_kernels.h"
#include "executors/device_backend.h"

namespace fsdpc {

namespace {

class CpuBackend final : public DeviceBackend {
 public:
  Device device() const override { return Device{}; }
  // A cache line, and an AVX-512 register.
  size_t alignment() const override { return 64; }
  void* allocate(size_t bytes) override { return bytes ? std::aligned_alloc(64, bytes) : nullptr; }
  void deallocate(void* p) override { std::free(p); }
  void zero(void* p, size_t bytes) override {
    if (bytes) std::memset(p, 0, bytes);
  }
  void copy_from_host(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }

  // The update loops split over the rank's threads element by element:
  // each element's arithmetic is the same whatever the thread count.
  void add_into(float* dst, const float* src, int64_t n) override {
    FSDPC_CPU_PARALLEL_FOR(n)
    for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
  }
  void scale(float* x, int64_t n, float s) override {
    FSDPC_CPU_PARALLEL_FOR(n)
    for (int64_t i = 0; i < n; ++i) x[i] *= s;
  }
  // A float's square is exact in double, so only the additions round; each
  // span is summed on its own, then the spans' sums in order. Threads
  // take whole spans, so the result does not depend on their count.
  double sum_squares(const std::vector<Span>& xs) override {
    const int64_t spans = static_cast<int64_t>(xs.size());
    int64_t elements = 0;
    for (const Span& x : xs) elements += x.n;
    std::vector<double> sums(xs.size(), 0.0);
#pragma omp parallel for schedule(dynamic) num_threads(cpu_threads()) if (elements >= cpu::kParallelMin && spans > 1)
    for (int64_t k = 0; k < spans; ++k) {
      double sq = 0;
      for (int64_t i = 0; i < xs[k].n; ++i) sq += static_cast<double>(xs[k].data[i]) * xs[k].data[i];
      sums[k] = sq;
    }
    double total = 0;
    for (double sq : sums) total += sq;
    return total;
  }

  // Arithmetic in double, state kept in float: the float rounding then
  // happens once per stored value rather than once per operation.
  void sgd_update(float* param, const float* grad, float* buf, int64_t n, const SgdStep& s) override {
    FSDPC_CPU_PARALLEL_FOR(n)
    for (int64_t i = 0; i < n; ++i) {
      double g = static_cast<double>(grad[i]) + s.weight_decay * static_cast<double>(param[i]);
      if (buf) {
        // torch: the buffer starts as a copy of the first (decayed) gradient.
        double b = s.first ? g : s.momentum * static_cast<double>(buf[i]) + g;
        buf[i] = static_cast<float>(b);
        g = b;
      }
      param[i] = static_cast<float>(static_cast<double>(param[i]) - s.lr * g);
    }
  }

  void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, const AdamwStep& s) override {
    const double decay = 1.0 - s.lr * s.weight_decay, b1 = s.beta1, b2 = s.beta2;
    FSDPC_CPU_PARALLEL_FOR(n)
    for (int64_t i = 0; i < n; ++i) {
      double g = grad[i];
      double x = static_cast<double>(param[i]) * decay;
      double mi = b1 * static_cast<double>(m[i]) + (1.0 - b1) * g;
      double vi = b2 * static_cast<double>(v[i]) + (1.0 - b2) * g * g;
      m[i] = static_cast<float>(mi);
      v[i] = static_cast<float>(vi);
      double denom = std::sqrt(vi) / s.bias_correction2_sqrt + s.eps;
      param[i] = static_cast<float>(x - s.step_size * mi / denom);
    }
  }

  void synchronize() override {}
};

}  // namespace

DeviceBackend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

}  // namespace fsdpc
