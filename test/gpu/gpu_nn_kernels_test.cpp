// The matmul and nn CUDA kernels (matmul, linear, gelu, softmax,
// layer_norm, scaled_dot_product_attention, cross_entropy, the fused head's
// four ops) against the CPU
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

namespace {

// A fused head's case: h [rows..., c], w [v, c], `chunk` rows a block (0:
// the kernel's byte budget).
struct HeadShape {
  Shape rows;
  int64_t v, c, chunk;
};

Attrs chunk_attrs(const HeadShape& s) { return s.chunk ? Attrs{{"chunk", s.chunk}} : Attrs{}; }

Shape h_shape(const HeadShape& s) {
  Shape h = s.rows;
  h.push_back(s.c);
  return h;
}

// A rank-0 tensor (g, a slice's offset), not a literal.
Arg scalar_tensor(DType d, double v) {
  Arg a;
  a.type.dtype = d;
  a.data = {v};
  return a;
}
Arg f32_scalar(double v) { return scalar_tensor(DType::f32, v); }

// h and w in `d` (bf16: the f32 draw rounded), then the other operands as given.
std::vector<Arg> head_args(Arg hv, Arg wv, DType d, std::vector<Arg> rest) {
  std::vector<Arg> args = d == DType::bf16 ? as_bf16({std::move(hv), std::move(wv)})
                                           : std::vector<Arg>{std::move(hv), std::move(wv)};
  args.insert(args.end(), rest.begin(), rest.end());
  return args;
}

// Odd shapes; a vocabulary no chunk divides; one chunk; a chunk of one
// row; rows from two dims; the byte budget's chunk over GPT-2's vocabulary.
const std::vector<HeadShape> kHeadShapes = {
    {{13}, 1031, 24, 7}, {{2, 9}, 257, 33, 1},   {{5}, 97, 16, 100},  {{37}, 2000, 40, 5},
    {{1}, 1, 8, 0},      {{3, 7}, 50257, 64, 0}, {{300}, 129, 17, 0}, {{0}, 11, 8, 3}};

}  // namespace

// The fused head (executors/cuda/cuda_head.cpp) against the CPU's chunked
// kernels (executors/cpu/cpu_head.h), the same trace on both sides: f32, and
// bf16 operands (the logits rounded to bf16 where the decomposition rounds
// them, dw narrowed once, or kept f32 by dw_dtype), i32 and i64 targets.
TEST_CASE("gpu kernels: linear_cross_entropy, its gradient and both at once", "[gpu][kernels][fuse_head]") {
  Harness h;
  int i = 0;
  for (const HeadShape& s : kHeadShapes) {
    INFO("rows " << shape_str(s.rows) << ", V " << s.v << ", C " << s.c << ", chunk " << s.chunk);
    const Arg hv = h.r.tensor(h_shape(s)), wv = h.r.tensor({s.v, s.c}, DType::f32, 0.5);
    const Arg targets = h.r.indices(s.rows, i++ % 2 ? DType::i32 : DType::i64, s.v);
    for (DType d : {DType::f32, DType::bf16}) {
      INFO(dtype_name(d));
      h.check_as_stored(OpId::LinearCrossEntropy, head_args(hv, wv, d, {targets}), chunk_attrs(s));
      const std::vector<Arg> grad = head_args(hv, wv, d, {targets, f32_scalar(0.75)});
      h.check_as_stored(OpId::LinearCrossEntropyGrad, grad, chunk_attrs(s));
      h.check_as_stored(OpId::LinearCrossEntropyWithGrad, grad, chunk_attrs(s));
      Attrs wide = chunk_attrs(s);
      wide.set("dw_dtype", std::string("f32"));
      if (d == DType::bf16) h.check_as_stored(OpId::LinearCrossEntropyGrad, grad, wide);
      if (d == DType::bf16) h.check_as_stored(OpId::LinearCrossEntropyWithGrad, grad, wide);
    }
  }
}

// One tensor-parallel rank's slice at a time: the vocabulary split T ways,
// the last slice padded past V, and (V 9 over 4) a slice of padding only
// (lse -inf, zero gradients). The gradient's lse is the CPU's own.
TEST_CASE("gpu kernels: linear_cross_entropy_stats and its gradient over padded slices",
          "[gpu][kernels][fuse_head][tp]") {
  Harness h;
  struct Split {
    HeadShape whole;
    int tp;
  };
  const std::vector<Split> splits = {{{{13}, 1031, 24, 7}, 2}, {{{2, 9}, 257, 33, 1}, 3}, {{{5}, 9, 16, 100}, 4},
                                     {{{3, 7}, 50257, 64, 0}, 2}, {{{37}, 2000, 40, 5}, 3}};
  int i = 0;
  for (const auto& [whole, tp] : splits) {
    const int64_t per = (whole.v + tp - 1) / tp;
    const HeadShape s{whole.rows, per, whole.c, whole.chunk};
    const DType index = i++ % 2 ? DType::i32 : DType::i64;
    const Arg targets = h.r.indices(s.rows, index, whole.v);
    Attrs attrs = chunk_attrs(s);
    attrs.set("vocab", whole.v);
    for (int rank = 0; rank < tp; ++rank) {
      INFO("rows " << shape_str(s.rows) << ", V " << whole.v << " over " << tp << ", rank " << rank << ", chunk "
                   << s.chunk);
      const Arg hv = h.r.tensor(h_shape(s)), wv = h.r.tensor({per, s.c}, DType::f32, 0.5);
      const Arg offset = scalar_tensor(index, static_cast<double>(rank * per));
      for (DType d : {DType::f32, DType::bf16}) {
        INFO(dtype_name(d));
        const std::vector<Arg> stats = head_args(hv, wv, d, {targets, offset});
        h.check_as_stored(OpId::LinearCrossEntropyStats, stats, attrs);
        // lse from the CPU's stats, so exp(z - lse) is a softmax's.
        std::vector<Data> inputs;
        for (const Arg& a : stats) inputs.push_back(a.data);
        const std::vector<Arg> lse_tl =
            h.run(one_op_trace(OpId::LinearCrossEntropyStats, stats, attrs, Device{}), inputs, false);
        const Arg dlse = h.r.tensor(s.rows, DType::f32, 0.1), dtl = h.r.tensor(s.rows, DType::f32, 0.1);
        std::vector<Arg> grad = stats;
        grad.insert(grad.end(), {lse_tl[0], dlse, dtl});
        h.check_as_stored(OpId::LinearCrossEntropyStatsGrad, grad, attrs);
        if (d == DType::bf16) {
          Attrs wide = attrs;
          wide.set("dw_dtype", std::string("f32"));
          h.check_as_stored(OpId::LinearCrossEntropyStatsGrad, grad, wide);
        }
      }
    }
  }
}

// What the CPU refuses (a target out of range) the GPU cannot see without
// synchronising: the row is poisoned instead, as cross_entropy's kernel
// does (kernels/linear_cross_entropy.h). And the chunked sums have a fixed
// order: the same inputs give the same bits.
TEST_CASE("gpu kernels: the fused head's out-of-range targets give NaN; its results repeat bit for bit",
          "[gpu][kernels][fuse_head]") {
  Harness h;
  const HeadShape s{{6}, 50, 8, 4};
  const Arg hv = h.r.tensor(h_shape(s)), wv = h.r.tensor({s.v, s.c}, DType::f32, 0.5);
  Arg targets = h.r.indices(s.rows, DType::i64, s.v);
  auto run_gpu = [&](OpId op, const std::vector<Arg>& args, const Attrs& attrs) {
    std::vector<Data> inputs;
    for (const Arg& a : args) inputs.push_back(a.data);
    return h.run(one_op_trace(op, args, attrs, kGpu), inputs, true);
  };
  const std::vector<Arg> grad = {hv, wv, targets, f32_scalar(1.0)};
  const std::vector<Arg> once = run_gpu(OpId::LinearCrossEntropyGrad, grad, chunk_attrs(s));
  const std::vector<Arg> again = run_gpu(OpId::LinearCrossEntropyGrad, grad, chunk_attrs(s));
  CHECK(once[0].data == again[0].data);
  CHECK(once[1].data == again[1].data);
  const Data loss = run_gpu(OpId::LinearCrossEntropy, {hv, wv, targets}, chunk_attrs(s))[0].data;
  CHECK(loss == run_gpu(OpId::LinearCrossEntropy, {hv, wv, targets}, chunk_attrs(s))[0].data);
  CHECK(std::isfinite(loss[0]));

  targets.data[4] = static_cast<double>(s.v);  // past the vocabulary
  CHECK(std::isnan(run_gpu(OpId::LinearCrossEntropy, {hv, wv, targets}, chunk_attrs(s))[0].data[0]));
  const std::vector<Arg> poisoned = run_gpu(OpId::LinearCrossEntropyGrad, {hv, wv, targets, f32_scalar(1.0)},
                                            chunk_attrs(s));
  for (int64_t r = 0; r < 6; ++r)
    CHECK(std::isnan(poisoned[0].data[static_cast<size_t>(r * s.c)]) == (r == 4));  // dh: row 4 only
  CHECK(std::isnan(poisoned[1].data[0]));                                            // dw: every entry
  Attrs attrs = chunk_attrs(s);
  attrs.set("vocab", s.v);
  targets.data[4] = -1.0;
  const Arg offset = scalar_tensor(DType::i64, 0.0);
  const std::vector<Arg> stats = run_gpu(OpId::LinearCrossEntropyStats, {hv, wv, targets, offset}, attrs);
  CHECK(std::isnan(stats[0].data[4]));
  CHECK(std::isnan(stats[1].data[4]));
  CHECK(std::isfinite(stats[0].data[3]));
}
