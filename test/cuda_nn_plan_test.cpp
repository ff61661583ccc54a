// The CUDA nn kernels: their host-side planning (executors/cuda/nn_plan.h:
// the row split of softmax / layer_norm / cross_entropy, the warp-or-block
// choice and its geometry, attention's head groups), checked anywhere; and,
// where a GPU is present, the kernels themselves against float64 formulas
// (tagged [gpu]; skipped, saying so, without a device).
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
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

TEST_CASE("split_at: a softmax dim splits the shape into outer, n, inner", "[cuda][nn_plan]") {
  const std::vector<int64_t> s{2, 3, 4, 5};
  auto a = split_at(s, 3);  // the last dim: rows of 5
  CHECK(a.outer == 24);
  CHECK(a.n == 5);
  CHECK(a.inner == 1);
  a = split_at(s, 1);
  CHECK(a.outer == 2);
  CHECK(a.n == 3);
  CHECK(a.inner == 20);
  a = split_at(s, 0);
  CHECK(a.outer == 1);
  CHECK(a.n == 2);
  CHECK(a.inner == 60);
  a = split_at({7}, 0);
  CHECK((a.outer == 1 && a.n == 7 && a.inner == 1));
  a = split_at({4, 0, 3}, 2);  // an empty tensor plans zero rows
  CHECK(a.outer == 0);
}

TEST_CASE("split_rows: rows of the last dim", "[cuda][nn_plan]") {
  auto r = split_rows({8, 1024, 768});
  CHECK(r.rows == 8 * 1024);
  CHECK(r.cols == 768);
  r = split_rows({50257});
  CHECK((r.rows == 1 && r.cols == 50257));
  r = split_rows({});
  CHECK((r.rows == 1 && r.cols == 1));
  r = split_rows({0, 10});
  CHECK((r.rows == 0 && r.cols == 10));
}

TEST_CASE("plan_row_launch: many short rows get a warp each", "[cuda][nn_plan]") {
  const RowLaunch r = plan_row_launch(8192, 768);
  CHECK(r.warp_per_row);
  CHECK(r.launch.block == static_cast<uint32_t>(kWarpRowBlock));
  // 8192 rows of one warp each, eight warps a block.
  CHECK(r.launch.grid == 8192 / (kWarpRowBlock / kWarp));
  // Capped grid: the kernel's warps loop over the remaining rows.
  const RowLaunch big = plan_row_launch(int64_t{1} << 24, 64);
  CHECK(big.warp_per_row);
  CHECK(big.launch.grid == static_cast<uint32_t>(kMaxGrid));
}

TEST_CASE("plan_row_launch: long rows, or few rows, get a block each", "[cuda][nn_plan]") {
  RowLaunch r = plan_row_launch(8192, 50257);  // GPT-2's vocabulary
  CHECK_FALSE(r.warp_per_row);
  CHECK(r.launch.block == 1024);
  CHECK(r.launch.grid == 4224);
  r = plan_row_launch(kWarpRowMinRows, kWarpRowMaxCols + 1);
  CHECK_FALSE(r.warp_per_row);
  r = plan_row_launch(kWarpRowMinRows, kWarpRowMaxCols);
  CHECK(r.warp_per_row);
  r = plan_row_launch(16, 768);  // few rows: a block each spreads the work
  CHECK_FALSE(r.warp_per_row);
  CHECK(r.launch.grid == 16);
  CHECK(r.launch.block == 1024);
  r = plan_row_launch(16, 100);
  CHECK(r.launch.block == 128);
  // Whatever the path, blocks are whole warps (the reductions shuffle full warps).
  for (int64_t rows : {1, 100, 1024, 5000})
    for (int64_t cols : {1, 31, 33, 1000, 1025, 100000}) {
      const RowLaunch p = plan_row_launch(rows, cols);
      CHECK(p.launch.block % kWarp == 0);
      CHECK(p.launch.block <= static_cast<uint32_t>(kMaxBlock));
      CHECK(p.launch.grid >= 1);
      CHECK(p.launch.grid <= static_cast<uint32_t>(kMaxGrid));
    }
}

TEST_CASE("plan_row_launch: empty tensors launch nothing", "[cuda][nn_plan]") {
  CHECK(plan_row_launch(0, 100).launch.grid == 0);
  CHECK(plan_row_launch(100, 0).launch.grid == 0);
}

TEST_CASE("plan_attention: sizes, steps and head groups", "[cuda][nn_plan]") {
  // GPT-2 small: batch 8, 12 heads, 1024 tokens, head size 64.
  const std::vector<int64_t> q{8, 12, 1024, 64};
  AttentionPlan p = plan_attention(q, q, q, kAttentionScoreFloats);
  CHECK(p.batch == 96);
  CHECK((p.tq == 1024 && p.tk == 1024 && p.d == 64 && p.dv == 64));
  CHECK(p.q_step == 1024 * 64);
  CHECK(p.k_step == 1024 * 64);
  CHECK(p.v_step == 1024 * 64);
  CHECK(p.o_step == 1024 * 64);
  CHECK(p.s_step == 1024 * 1024);
  CHECK(p.group == 16);  // 64 MiB of f32 scores
  CHECK(p.fits_int);
  CHECK_FALSE(p.empty());

  // Cross-attention shapes: Tq != Tk, D != Dv.
  p = plan_attention({2, 5, 8}, {2, 7, 8}, {2, 7, 3}, 1000);
  CHECK((p.batch == 2 && p.tq == 5 && p.tk == 7 && p.d == 8 && p.dv == 3));
  CHECK(p.q_step == 40);
  CHECK(p.k_step == 56);
  CHECK(p.v_step == 21);
  CHECK(p.o_step == 15);
  CHECK(p.s_step == 35);
  CHECK(p.group == 2);  // the whole batch fits the budget

  // A budget below one matrix still runs one at a time.
  p = plan_attention({3, 64, 16}, {3, 64, 16}, {3, 64, 16}, 100);
  CHECK(p.group == 1);
  // Rank 2: one matrix.
  p = plan_attention({4, 2}, {6, 2}, {6, 5}, kAttentionScoreFloats);
  CHECK((p.batch == 1 && p.group == 1));
}

TEST_CASE("plan_attention: empty outputs and cuBLAS's int range", "[cuda][nn_plan]") {
  CHECK(plan_attention({0, 4, 8}, {0, 4, 8}, {0, 4, 8}, 100).empty());
  CHECK(plan_attention({2, 0, 8}, {2, 4, 8}, {2, 4, 8}, 100).empty());
  CHECK(plan_attention({2, 4, 8}, {2, 4, 8}, {2, 4, 0}, 100).empty());
  // No keys or no features: not empty, the kernel writes zeros / uniform weights.
  AttentionPlan p = plan_attention({2, 4, 8}, {2, 0, 8}, {2, 0, 8}, 100);
  CHECK_FALSE(p.empty());
  CHECK(p.group == 2);
  p = plan_attention({2, 4, 0}, {2, 4, 0}, {2, 4, 3}, 100);
  CHECK_FALSE(p.empty());
  const int64_t huge = int64_t{std::numeric_limits<int>::max()} + 1;
  CHECK_FALSE(plan_attention({1, 1, huge}, {1, 1, huge}, {1, 1, 1}, 100).fits_int);
  CHECK(plan_attention({1, 1, 8}, {1, 1, 8}, {1, 1, 1}, 100).fits_int);
}

// ---- On a GPU: the launches and the attention KernelFn against float64.

namespace {

using fsdpc::DType;

bool have_gpu() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  (void)cudaGetLastError();  // clears the error a machine without a device reports
  return ok;
}

#define SKIP_WITHOUT_GPU()                                 \
  if (!have_gpu()) {                                       \
    WARN("no CUDA device: the kernel checks are skipped"); \
    return;                                                \
  }

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

TEST_CASE("softmax rows match float64 on both paths, causal, in place and bf16", "[cuda][gpu][nn]") {
  SKIP_WITHOUT_GPU();
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

TEST_CASE("softmax over a dim that is not the last matches float64", "[cuda][gpu][nn]") {
  SKIP_WITHOUT_GPU();
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

TEST_CASE("layer_norm matches float64, near-constant rows included", "[cuda][gpu][nn]") {
  SKIP_WITHOUT_GPU();
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

TEST_CASE("cross_entropy matches float64; bad targets and no rows give NaN", "[cuda][gpu][nn]") {
  SKIP_WITHOUT_GPU();
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

TEST_CASE("gelu (approximate=tanh) matches float64", "[cuda][gpu][nn]") {
  SKIP_WITHOUT_GPU();
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

TEST_CASE("sdpa_kernel matches float64, causal and not, f32 and bf16", "[cuda][gpu][nn]") {
  SKIP_WITHOUT_GPU();
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
