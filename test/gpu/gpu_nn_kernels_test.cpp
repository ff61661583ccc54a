// The matmul and nn CUDA kernels (matmul, linear, gelu, softmax,
// layer_norm, scaled_dot_product_attention, cross_entropy) against the CPU
// executor on random shapes and GPT-2-sized ones, as gpu_kernels_test.cpp
// does the rest: f32 to 1e-5 relative, bf16 to 1e-2, ops whose outputs
// cancel held to a tenth of the largest output (kernel_harness.h). A run
// that skips an op of kernel_coverage.h's list fails.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernel_coverage.h"
#include "kernel_harness.h"

using namespace fsdpc;
using namespace fsdpc::gpu_test;

namespace {
const ComparesOps kCoverage(kComparedByNnKernelsTest);
}  // namespace

TEST_CASE("gpu kernels: matmul (2-D, batched, shared 2-D right operand) and linear", "[gpu][kernels]") {
  Harness h;
  for (int i = 0; i < 2 * kShapes; ++i) {
    const int64_t m = h.r.dim(), k = i % 7 == 0 ? 0 : h.r.dim(), n = h.r.dim();
    Shape a = h.r.shape(0, 2), b = a;
    a.insert(a.end(), {m, k});
    b.insert(b.end(), {k, n});
    h.check_f32_bf16(OpId::Matmul, {h.r.tensor(a), h.r.tensor(b)});
    h.check_f32_bf16(OpId::Matmul, {h.r.tensor(a), h.r.tensor({k, n})});
    h.check_f32_bf16(OpId::Linear, {h.r.tensor(a), h.r.tensor({n, k})});
    h.check_f32_bf16(OpId::Linear, {h.r.tensor(a), h.r.tensor({n, k}), h.r.tensor({n})});
  }
  h.check_f32_bf16(OpId::Matmul, {h.r.tensor({2, 65, 130}), h.r.tensor({130, 97})});
  h.check_f32_bf16(OpId::Matmul, {h.r.tensor({2, 520, 24}), h.r.tensor({2, 24, 17})});
  h.check_f32_bf16(OpId::Matmul, {h.r.tensor({512, 768}), h.r.tensor({768, 768})});
  h.check_f32_bf16(OpId::Linear, {h.r.tensor({3, 50, 96}), h.r.tensor({130, 96}), h.r.tensor({130})});
  h.check_f32_bf16(OpId::Linear, {h.r.tensor({2, 128, 768}), h.r.tensor({2304, 768}), h.r.tensor({2304})});
  h.check_f32_bf16(OpId::Linear, {h.r.tensor({256, 768}), h.r.tensor({768, 768})});
}

TEST_CASE("gpu kernels: gelu, softmax over any dim, layer_norm", "[gpu][kernels]") {
  Harness h;
  for (int i = 0; i < kShapes; ++i) {
    const Shape s = i == 0 ? Shape{1000} : i == 1 ? Shape{4, 3072} : h.r.shape(0, 4);
    h.check_f32_bf16(OpId::Gelu, {h.r.tensor(s, DType::f32, 3.0)}, Attrs{{"approximate", std::string("tanh")}});
  }
  std::vector<std::pair<Shape, int64_t>> softmax{
      {{7, 3000}, 1}, {{64, 1024}, 1}, {{2, 4, 129, 2048}, 3}, {{1000, 3, 5}, 0}, {{2, 2048, 3}, 1}};
  for (int i = 0; i < 2 * kShapes; ++i) {
    const Shape s = h.r.shape(1, 4);
    softmax.emplace_back(s, h.r.uniform_int(0, static_cast<int64_t>(s.size()) - 1));
  }
  for (const auto& [s, dim] : softmax)
    h.check_f32_bf16(OpId::Softmax, {h.r.tensor(s, DType::f32, 4.0)}, Attrs{{"dim", dim}});
  for (int i = 0; i < 2 * kShapes; ++i) {
    Shape s = i < 3 ? Shape{i == 2 ? 300 : 64} : h.r.shape(0, 2);
    s.push_back(i < 3 ? std::array<int64_t, 3>{768, 2048, 1024}[static_cast<size_t>(i)] : h.r.dim());
    Arg x = h.r.tensor(s);
    if (i % 3 == 1)
      for (double& v : x.data) v = static_cast<float>(v + 50.0);  // a one-pass variance would cancel
    const Shape c{s.back()};
    h.check_f32_bf16(OpId::LayerNorm, {x, h.r.tensor(c), h.r.tensor(c)}, Attrs{{"eps", 1e-5}});
  }
}

TEST_CASE("gpu kernels: silu, rms_norm", "[gpu][kernels]") {
  Harness h;
  for (int i = 0; i < kShapes; ++i) {
    const Shape s = i == 0 ? Shape{1000} : i == 1 ? Shape{4, 3072} : h.r.shape(0, 4);
    h.check_f32_bf16(OpId::Silu, {h.r.tensor(s, DType::f32, 8.0)});
  }
  for (int i = 0; i < 2 * kShapes; ++i) {
    Shape s = i < 3 ? Shape{i == 2 ? 300 : 64} : h.r.shape(0, 2);
    s.push_back(i < 3 ? std::array<int64_t, 3>{576, 2048, 4096}[static_cast<size_t>(i)] : h.r.dim());
    Arg x = h.r.tensor(s);
    if (i % 3 == 1)
      for (double& v : x.data) v = static_cast<float>(v + 50.0);
    h.check_f32_bf16(OpId::RmsNorm, {x, h.r.tensor({s.back()})}, Attrs{{"eps", 1e-6}});
  }
}

TEST_CASE("gpu kernels: scaled_dot_product_attention (causal and not) and cross_entropy", "[gpu][kernels]") {
  Harness h;
  for (int i = 0; i < 2 * kShapes; ++i) {
    const Shape batch = h.r.shape(0, 2);
    const int64_t tq = h.r.dim(), tk = i == 0 ? 0 : h.r.dim(), d = h.r.dim(false), dv = h.r.dim();
    auto with = [&](int64_t a, int64_t b) {
      Shape s = batch;
      s.insert(s.end(), {a, b});
      return h.r.tensor(s);
    };
    const Attrs attrs{{"is_causal", i % 2 == 0}, {"scale", h.r.uniform(0.1, 1.0)}};
    h.check_f32_bf16(OpId::ScaledDotProductAttention, {with(tq, d), with(tk, d), with(tk, dv)}, attrs);
  }
  // [heads, Tq, Tk, D] of two sequences: blocks of query rows, Tq != Tk, and a GPT-2 layer's.
  const std::array<std::array<int64_t, 4>, 5> big{
      {{2, 70, 70, 16}, {1, 530, 530, 16}, {2, 200, 150, 8}, {1, 150, 300, 32}, {12, 256, 256, 64}}};
  for (const auto& [heads, tq, tk, d] : big)
    for (bool causal : {true, false})
      h.check_f32_bf16(OpId::ScaledDotProductAttention,
                       {h.r.tensor({2, heads, tq, d}), h.r.tensor({2, heads, tk, d}), h.r.tensor({2, heads, tk, d})},
                       Attrs{{"is_causal", causal}, {"scale", 1.0 / std::sqrt(static_cast<double>(d))}});
  for (int i = 0; i < 2 * kShapes; ++i) {
    const Shape rows = i == 0 ? Shape{128} : i == 1 ? Shape{4} : h.r.shape(0, 2);
    Shape s = rows;
    s.push_back(i == 0 ? 5000 : i == 1 ? 50257 : h.r.dim(false));
    const Arg targets = h.r.indices(rows, i % 2 ? DType::i32 : DType::i64, s.back());
    h.check_f32_bf16(OpId::CrossEntropy, {h.r.tensor(s, DType::f32, 3.0), targets});
  }
}
