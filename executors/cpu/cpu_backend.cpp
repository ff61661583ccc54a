// The CPU's DeviceBackend: host memory and the training step's loops.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "executors/cpu/cpu_kernels.h"
#include "executors/device_backend.h"

namespace fsdpc {

namespace {

// The optimizer's loops, one function per case so each vectorises without
// branches, compiled for the widest ISA the CPU has (FSDPC_CPU_CLONES). The
// file is built with -ffp-contract=off: no multiply-add is fused, so every
// element's arithmetic is the scalar code's, bit for bit, on any ISA and
// any thread count (sqrt and division are correctly rounded in every
// width). `c` is clipping's float coefficient (1 without clipping): torch
// multiplies the float gradient by it, so g * c is rounded to float first.
template <bool kMomentum, bool kFirst>
[[gnu::always_inline]] inline void sgd_body(float* __restrict p, const float* __restrict grad, float* __restrict buf,
                                            int64_t n, double lr, double mu, double wd, float c) {
  for (int64_t i = 0; i < n; ++i) {
    double g = static_cast<double>(grad[i] * c) + wd * static_cast<double>(p[i]);
    if constexpr (kMomentum) {
      // torch: the buffer starts as a copy of the first (decayed) gradient.
      const double b = kFirst ? g : mu * static_cast<double>(buf[i]) + g;
      buf[i] = static_cast<float>(b);
      g = b;
    }
    p[i] = static_cast<float>(static_cast<double>(p[i]) - lr * g);
  }
}
FSDPC_CPU_CLONES void sgd_span(float* p, const float* g, float* buf, int64_t n, double lr, double mu, double wd,
                               float c) {
  sgd_body<false, false>(p, g, buf, n, lr, mu, wd, c);
}
FSDPC_CPU_CLONES void sgd_momentum_first_span(float* p, const float* g, float* buf, int64_t n, double lr, double mu,
                                              double wd, float c) {
  sgd_body<true, true>(p, g, buf, n, lr, mu, wd, c);
}
FSDPC_CPU_CLONES void sgd_momentum_span(float* p, const float* g, float* buf, int64_t n, double lr, double mu,
                                        double wd, float c) {
  sgd_body<true, false>(p, g, buf, n, lr, mu, wd, c);
}

// kFirst: m and v are not read (the optimizer skips zeroing them); their
// zeros are added as the general case adds b * 0 = +0, so -0 stays +0.
template <bool kFirst>
[[gnu::always_inline]] inline void adamw_body(float* __restrict p, const float* __restrict grad, float* __restrict m,
                                              float* __restrict v, int64_t n, const AdamwStep& s) {
  const double decay = 1.0 - s.lr * s.weight_decay, b1 = s.beta1, b2 = s.beta2;
  const double step_size = s.step_size, bc2 = s.bias_correction2_sqrt, eps = s.eps;
  const float c = s.grad_scale;
  for (int64_t i = 0; i < n; ++i) {
    const double g = grad[i] * c;
    const double x = static_cast<double>(p[i]) * decay;
    const double m0 = kFirst ? 0.0 : b1 * static_cast<double>(m[i]);
    const double v0 = kFirst ? 0.0 : b2 * static_cast<double>(v[i]);
    const double mi = m0 + (1.0 - b1) * g;
    const double vi = v0 + (1.0 - b2) * g * g;
    m[i] = static_cast<float>(mi);
    v[i] = static_cast<float>(vi);
    const double denom = std::sqrt(vi) / bc2 + eps;
    p[i] = static_cast<float>(x - step_size * mi / denom);
  }
}
FSDPC_CPU_CLONES void adamw_span(float* p, const float* g, float* m, float* v, int64_t n, const AdamwStep& s) {
  adamw_body<false>(p, g, m, v, n, s);
}
FSDPC_CPU_CLONES void adamw_first_span(float* p, const float* g, float* m, float* v, int64_t n, const AdamwStep& s) {
  adamw_body<true>(p, g, m, v, n, s);
}

// [0, n) in one contiguous range per thread (multiples of 64 elements, so
// threads do not share cache lines), each handed to f(begin, end).
template <class F>
void split_over_threads(int64_t n, const F& f) {
  const int threads = n >= cpu::kParallelMin ? cpu_threads() : 1;
  if (threads <= 1) {
    if (n > 0) f(int64_t{0}, n);
    return;
  }
  const int64_t chunk = ((n + threads - 1) / threads + 63) / 64 * 64;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int t = 0; t < threads; ++t) {
    const int64_t b = std::min(n, t * chunk), e = std::min(n, b + chunk);
    if (b < e) f(b, e);
  }
}

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
  void copy(void* dst, const void* src, size_t bytes) override {
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
  // happens once per stored value rather than once per operation. One pass
  // reads each of p, g (and the state) once and writes p (and the state).
  void sgd_update(float* param, const float* grad, float* buf, int64_t n, const SgdStep& s) override {
    const auto span = !buf ? sgd_span : s.first ? sgd_momentum_first_span : sgd_momentum_span;
    split_over_threads(n, [&](int64_t b, int64_t e) {
      span(param + b, grad + b, buf ? buf + b : nullptr, e - b, s.lr, s.momentum, s.weight_decay, s.grad_scale);
    });
  }

  void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, const AdamwStep& s) override {
    const auto span = s.first ? adamw_first_span : adamw_span;
    split_over_threads(n, [&](int64_t b, int64_t e) { span(param + b, grad + b, m + b, v + b, e - b, s); });
  }

  void synchronize() override {}
};

}  // namespace

DeviceBackend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

}  // namespace fsdpc
