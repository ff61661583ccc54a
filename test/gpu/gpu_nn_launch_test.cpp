// The CUDA nn kernel launches (softmax rows and strided, layer_norm,
// cross_entropy, gelu) and attention's KernelFn against float64 formulas on
// cuda:0; their host-side planning is checked without a GPU in
// test/cuda_nn_plan_test.cpp. Needs a device (gpu_test_main.cpp skips without one).
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numbers>
#include <random>
#include <vector>

#include "executors/cuda/cuda_context.h"
#include "executors/cuda/cuda_kernels.h"
#include "executors/cuda/kernels/cross_entropy.h"
#include "executors/cuda/kernels/gelu.h"
#include "executors/cuda/kernels/layer_norm.h"
#include "executors/cuda/kernels/softmax.h"
#include "executors/cuda/nn_plan.h"

using namespace fsdpc::cuda;

namespace {

using fsdpc::DType;

template <class T>
class DeviceVector {
 public:
  explicit DeviceVector(const std::vector<T>& host) : n_(host.size()) {
    REQUIRE(cudaMalloc(reinterpret_cast<void**>(&p_), std::max<size_t>(n_, 1) * sizeof(T)) == cudaSuccess);
    if (n_) REQUIRE(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  // n zeros.
  explicit DeviceVector(size_t n) : DeviceVector(std::vector<T>(n)) {}
  ~DeviceVector() { (void)cudaFree(p_); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  T* get() const { return p_; }
  std::vector<T> read() const {
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    std::vector<T> h(n_);
    if (n_) REQUIRE(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return h;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

std::vector<float> random_floats(size_t n, float mean, float sd, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(mean, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

// max |got - ref| / max(1, |ref|).
template <class T>
double worst_error(const std::vector<T>& got, const std::vector<double>& ref) {
  REQUIRE(got.size() == ref.size());
  double w = 0.0;
  for (size_t i = 0; i < got.size(); ++i)
    w = std::max(w, std::fabs(static_cast<double>(static_cast<float>(got[i])) - ref[i]) /
                        std::max(1.0, std::fabs(ref[i])));
  return w;
}

// Rows of softmax(scale * x); causal keeps column j <= (row % tq).
std::vector<double> softmax_ref(const std::vector<float>& x, int64_t rows, int64_t cols, double scale,
                                bool causal, int64_t tq) {
  std::vector<double> y(x.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t visible = causal ? std::min(cols, r % tq + 1) : cols;
    double m = -INFINITY, s = 0.0;
    for (int64_t j = 0; j < visible; ++j) m = std::max(m, scale * x[r * cols + j]);
    for (int64_t j = 0; j < visible; ++j) s += std::exp(scale * x[r * cols + j] - m);
    for (int64_t j = 0; j < visible; ++j) y[r * cols + j] = std::exp(scale * x[r * cols + j] - m) / s;
  }
  return y;
}

}  // namespace

TEST_CASE("softmax rows match float64 on both paths, causal, in place and bf16", "[gpu][nn]") {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{3, 5}, {2000, 100}, {4, 3000}, {1100, 1024}}) {
    std::vector<float> x = random_floats(rows * cols, 0.0f, 3.0f, 1);
    x[1] = -INFINITY;  // a masked score weighs 0
    DeviceVector<float> dx(x), dy(x.size());
    launch_softmax_rows(dx.get(), dy.get(), SoftmaxRows{.rows = rows, .cols = cols}, nullptr);
    CHECK(worst_error(dy.read(), softmax_ref(x, rows, cols, 1.0, false, 1)) < 1e-6);
  }
  // Attention's use: 2 matrices of 5 queries x 7 keys, scaled, causal, in place.
  std::vector<float> s = random_floats(10 * 7, 0.0f, 2.0f, 2);
  DeviceVector<float> ds(s);
  launch_softmax_rows(ds.get(), ds.get(), {.rows = 10, .cols = 7, .scale = 0.5f, .causal = true, .rows_per_matrix = 5},
                      nullptr);
  CHECK(worst_error(ds.read(), softmax_ref(s, 10, 7, 0.5, true, 5)) < 1e-6);
  // bf16 storage, f32 arithmetic: within bf16's rounding of the output.
  std::vector<__nv_bfloat16> xb(s.size());
  std::vector<float> rounded(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    xb[i] = __float2bfloat16(s[i]);
    rounded[i] = __bfloat162float(xb[i]);
  }
  DeviceVector<__nv_bfloat16> dxb(xb), dyb(xb.size());
  launch_softmax_rows(dxb.get(), dyb.get(), {.rows = 10, .cols = 7}, nullptr);
  CHECK(worst_error(dyb.read(), softmax_ref(rounded, 10, 7, 1.0, false, 1)) < 4e-3);
}

TEST_CASE("softmax over a dim that is not the last matches float64", "[gpu][nn]") {
  const int64_t outer = 3, n = 7, inner = 5;
  const std::vector<float> x = random_floats(outer * n * inner, 1.0f, 2.0f, 3);
  std::vector<double> ref(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double m = -INFINITY, s = 0.0;
      for (int64_t j = 0; j < n; ++j) m = std::max<double>(m, x[(o * n + j) * inner + i]);
      for (int64_t j = 0; j < n; ++j) s += std::exp(x[(o * n + j) * inner + i] - m);
      for (int64_t j = 0; j < n; ++j) ref[(o * n + j) * inner + i] = std::exp(x[(o * n + j) * inner + i] - m) / s;
    }
  DeviceVector<float> dx(x), dy(x.size());
  launch_softmax_strided(dx.get(), dy.get(), outer, n, inner, nullptr);
  CHECK(worst_error(dy.read(), ref) < 1e-6);
}

TEST_CASE("layer_norm matches float64, near-constant rows included", "[gpu][nn]") {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{2000, 768}, {3, 5000}}) {
    std::vector<float> x = random_floats(rows * cols, 100.0f, 1.0f, 4);
    for (int64_t j = 0; j < cols; ++j) x[j] = 100.0f + 1e-3f * static_cast<float>(j % 7);  // rstd ~ 300
    const std::vector<float> w = random_floats(cols, 1.0f, 0.5f, 5), b = random_floats(cols, 0.0f, 0.5f, 6);
    const double eps = 1e-5;
    std::vector<double> ref(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0.0, var = 0.0;
      for (int64_t j = 0; j < cols; ++j) mean += x[r * cols + j];
      mean /= static_cast<double>(cols);
      for (int64_t j = 0; j < cols; ++j) var += (x[r * cols + j] - mean) * (x[r * cols + j] - mean);
      const double rstd = 1.0 / std::sqrt(var / static_cast<double>(cols) + eps);
      for (int64_t j = 0; j < cols; ++j) ref[r * cols + j] = (x[r * cols + j] - mean) * rstd * w[j] + b[j];
    }
    DeviceVector<float> dx(x), dw(w), db(b), dy(x.size());
    launch_layer_norm(dx.get(), dw.get(), db.get(), dy.get(), rows, cols, static_cast<float>(eps), nullptr);
    CHECK(worst_error(dy.read(), ref) < 1e-5);
  }
}

TEST_CASE("cross_entropy matches float64; bad targets and no rows give NaN", "[gpu][nn]") {
  for (auto [rows, classes] : {std::pair<int64_t, int64_t>{1500, 50}, {5, 3000}}) {
    const std::vector<float> z = random_floats(rows * classes, 0.0f, 4.0f, 7);
    std::vector<int64_t> t(rows);
    for (int64_t r = 0; r < rows; ++r) t[r] = (r * 7919) % classes;
    double total = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      double m = -INFINITY, s = 0.0;
      for (int64_t j = 0; j < classes; ++j) m = std::max<double>(m, z[r * classes + j]);
      for (int64_t j = 0; j < classes; ++j) s += std::exp(z[r * classes + j] - m);
      total += m + std::log(s) - z[r * classes + t[r]];
    }
    const double ref = total / static_cast<double>(rows);
    DeviceVector<float> dz(z), dl(static_cast<size_t>(rows)), dout(size_t{1});
    DeviceVector<int64_t> dt(t);
    launch_cross_entropy(dz.get(), dt.get(), dout.get(), dl.get(), rows, classes, nullptr);
    CHECK(std::fabs(dout.read()[0] - ref) < 1e-5 * std::max(1.0, std::fabs(ref)));
    const std::vector<int32_t> t32(t.begin(), t.end());
    DeviceVector<int32_t> dt32(t32);
    launch_cross_entropy(dz.get(), dt32.get(), dout.get(), dl.get(), rows, classes, nullptr);
    CHECK(std::fabs(dout.read()[0] - ref) < 1e-5 * std::max(1.0, std::fabs(ref)));
    t[rows - 1] = classes;  // out of range: the host cannot check it without synchronising
    DeviceVector<int64_t> bad(t);
    launch_cross_entropy(dz.get(), bad.get(), dout.get(), dl.get(), rows, classes, nullptr);
    CHECK(std::isnan(dout.read()[0]));
  }
  DeviceVector<float> dout(size_t{1});
  launch_cross_entropy(static_cast<const float*>(nullptr), static_cast<const int64_t*>(nullptr), dout.get(),
                       nullptr, 0, 10, nullptr);
  CHECK(std::isnan(dout.read()[0]));
}

TEST_CASE("gelu (approximate=tanh) matches float64", "[gpu][nn]") {
  const std::vector<float> x = random_floats(10000, 0.0f, 3.0f, 8);
  DeviceVector<float> dx(x), dy(x.size());
  std::vector<double> ref(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    ref[i] = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
  }
  launch_gelu(dx.get(), dy.get(), static_cast<int64_t>(x.size()), nullptr);
  CHECK(worst_error(dy.read(), ref) < 1e-6);
}

TEST_CASE("sdpa_kernel matches float64, causal and not, f32 and bf16", "[gpu][nn]") {
  fsdpc::cuda::CudaContext ctx;
  const int64_t batch = 6, tq = 5, tk = 7, d = 4, dv = 6;
  const std::vector<float> q = random_floats(batch * tq * d, 0.0f, 1.0f, 9),
                           k = random_floats(batch * tk * d, 0.0f, 1.0f, 10),
                           v = random_floats(batch * tk * dv, 0.0f, 1.0f, 11);
  for (DType dt : {DType::f32, DType::bf16})
    for (bool causal : {false, true}) {
      const bool bf = dt == DType::bf16;
      // Inputs as stored (bf16-rounded for bf16), so the reference sees the same values.
      auto stored = [&](const std::vector<float>& h) {
        std::vector<float> r(h);
        if (bf)
          for (float& x : r) x = __bfloat162float(__float2bfloat16(x));
        return r;
      };
      const std::vector<float> qs = stored(q), ks = stored(k), vs = stored(v);
      std::vector<double> ref(batch * tq * dv, 0.0);
      for (int64_t p = 0; p < batch; ++p)
        for (int64_t i = 0; i < tq; ++i) {
          std::vector<float> srow(tk);
          for (int64_t j = 0; j < tk; ++j) {
            double acc = 0.0;
            for (int64_t e = 0; e < d; ++e) acc += double{qs[(p * tq + i) * d + e]} * ks[(p * tk + j) * d + e];
            srow[j] = static_cast<float>(acc);
          }
          // The causal mask keeps keys j <= i: the softmax of that prefix.
          const int64_t visible = causal ? std::min(tk, i + 1) : tk;
          const std::vector<double> pr =
              softmax_ref(std::vector<float>(srow.begin(), srow.begin() + visible), 1, visible, 0.3, false, 1);
          for (int64_t j = 0; j < visible; ++j)
            for (int64_t e = 0; e < dv; ++e) ref[(p * tq + i) * dv + e] += pr[j] * vs[(p * tk + j) * dv + e];
        }
      auto upload = [&](const std::vector<float>& h) {
        std::vector<uint16_t> raw(h.size() * (bf ? 1 : 2));
        if (bf)
          for (size_t i = 0; i < h.size(); ++i) {
            raw[i] = static_cast<__nv_bfloat16_raw>(__float2bfloat16(h[i])).x;
          }
        else
          std::memcpy(raw.data(), h.data(), h.size() * 4);
        return raw;
      };
      DeviceVector<uint16_t> dq(upload(qs)), dk(upload(ks)), dvv(upload(vs)),
          dout(static_cast<size_t>(batch * tq * dv * (bf ? 1 : 2)));
      const fsdpc::Device dev{fsdpc::DeviceKind::cuda, 0};
      const fsdpc::TensorType tq_t{{2, 3, tq, d}, dt, dev}, tk_t{{2, 3, tk, d}, dt, dev},
          tv_t{{2, 3, tk, dv}, dt, dev}, to_t{{2, 3, tq, dv}, dt, dev};
      fsdpc::BoundSymbol b;
      b.op = fsdpc::OpId::ScaledDotProductAttention;
      b.attrs.set("is_causal", causal).set("scale", 0.3);
      const Views in{{dq.get(), &tq_t}, {dk.get(), &tk_t}, {dvv.get(), &tv_t}}, out{{dout.get(), &to_t}};
      sdpa_kernel(ctx, b, in, out);
      ctx.synchronize();
      const std::vector<uint16_t> raw = dout.read();
      std::vector<float> got(ref.size());
      for (size_t i = 0; i < got.size(); ++i) {
        if (bf) {
          __nv_bfloat16_raw h;
          h.x = raw[i];
          got[i] = __bfloat162float(__nv_bfloat16(h));
        } else {
          std::memcpy(&got[i], &raw[2 * i], 4);
        }
      }
      CHECK(worst_error(got, ref) < (bf ? 3e-2 : 1e-5));
    }
}
