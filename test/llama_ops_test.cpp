// The ops the Llama family adds (sin, cos, silu, rms_norm): their VJPs
// against central finite differences, rms_norm against Hugging Face's
// LlamaRMSNorm formula written out here (f32 statistics for bf16/f16
// inputs), the CPU kernels against the float64 reference, the fused path
// (composites decomposed into regions, and their VJPs through regions),
// and the frontend functions the Llama model calls.
#include <catch2/catch.hpp>

#include <time.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "frontend/tensor.h"
#include "ir/builder.h"
#include "passes/del.h"
#include "passes/grad.h"
#include "test/fusion_check.h"
#include "test/vjp_check.h"

using namespace fsdpc;

namespace {

Operand of(const Proxy& p) { return Operand::of(p.name); }

bool has_op(const std::vector<BoundSymbol>& bsyms, OpId op) {
  for (const BoundSymbol& b : bsyms)
    if (b.op == op || has_op(b.subsymbols, op)) return true;
  return false;
}

// One statement of `op` over fresh arguments x (shape) and, for rms_norm,
// w [shape.back()]; with or without its decomposition.
Trace one_op(OpId op, const Shape& shape, DType dtype = DType::f32, bool decompose = true, double eps = 1e-6) {
  Trace t;
  TraceBuilder b(t, TraceBuilder::Options{decompose});
  const Proxy x = b.add_arg(test::arg("x", test::tt(shape, dtype)));
  Proxy y;
  if (op == OpId::RmsNorm) {
    const Proxy w = b.add_arg(test::arg("w", test::tt({shape.back()}, dtype)));
    y = b.emit1(op, {of(x), of(w)}, {{"eps", eps}});
  } else {
    y = b.emit1(op, {of(x)});
  }
  t.returns = ReturnTree::tuple({ReturnTree::leaf(y.name)});
  return t;
}

// Hugging Face's LlamaRMSNorm.forward, written out: variance =
// x.pow(2).mean(-1), x * rsqrt(variance + eps), then weight * that.
std::vector<double> hf_rms_norm(const std::vector<double>& x, const std::vector<double>& w, double eps) {
  const size_t c = w.size();
  std::vector<double> y(x.size());
  for (size_t r = 0; r * c < x.size(); ++r) {
    double variance = 0;
    for (size_t j = 0; j < c; ++j) variance += std::pow(x[r * c + j], 2);
    variance /= static_cast<double>(c);
    for (size_t j = 0; j < c; ++j) y[r * c + j] = w[j] * (x[r * c + j] / std::sqrt(variance + eps));
  }
  return y;
}

double worst_rel(const std::vector<double>& got, const std::vector<double>& want) {
  double worst = 0, scale = 1e-30;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]) / scale);
  return worst;
}

const std::vector<Shape> kShapes = {{37, 129}, {5, 1}, {1, 1}, {4, 0}, {2, 3, 33}, {7, 1001}, {9}, {3000, 24}};

}  // namespace

TEST_CASE("llama ops: sin, cos, silu and rms_norm against finite differences", "[llama_ops][vjp]") {
  using testing::GradCheck;
  for (uint64_t seed : {1, 2, 3}) {
    for (OpId op : {OpId::Sin, OpId::Cos, OpId::Silu}) {
      GradCheck c(seed);
      c.finish(c.emit(op, {testing::in(c.param(c.shape(c.integer(0, 3)), -4.0, 4.0))}));
      INFO(op_name(op));
      c.check(std::string(op_name(op)) + " seed " + std::to_string(seed));
    }
    for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
      GradCheck c(seed);
      const Shape s = c.shape(c.integer(1, 3), 1, 5);
      const Proxy x = c.param(s, -2.0, 2.0, DistType::none, testing::Tie::rank, dt);
      const Proxy w = c.param({s.back()}, -1.5, 1.5, DistType::none, testing::Tie::rank, dt);
      c.finish(c.emit(OpId::RmsNorm, {testing::in(x), testing::in(w)}, {{"eps", seed == 2 ? 0.5 : 1e-6}}));
      c.check("rms_norm " + std::string(dtype_name(dt)) + " seed " + std::to_string(seed));
    }
  }
}

TEST_CASE("llama ops: rms_norm equals Hugging Face's formula, decomposed and direct", "[llama_ops]") {
  std::mt19937 rng(5);
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (const Shape& shape : {Shape{3, 8}, Shape{2, 3, 5}, Shape{1, 1}, Shape{6}}) {
      for (bool decompose : {true, false}) {
        const Trace t = one_op(OpId::RmsNorm, shape, dt, decompose, 1e-5);
        const std::vector<reference::Value> args = test::random_args(t, rng, -3.0, 3.0);
        const std::vector<reference::Value> got = reference::run(t, args);
        INFO(dtype_name(dt) << " " << shape_str(shape) << (decompose ? " decomposed" : " direct"));
        CHECK(got[0].type.dtype == dt);
        CHECK(worst_rel(got[0].data, hf_rms_norm(args[0].data, args[1].data, 1e-5)) < 1e-14);
      }
    }
}

TEST_CASE("llama ops: rms_norm's decomposition computes bf16/f16 statistics in f32, as Hugging Face",
          "[llama_ops]") {
  for (DType dt : {DType::bf16, DType::f16}) {
    const Trace t = one_op(OpId::RmsNorm, {4, 6}, dt);
    const BoundSymbol& rms = t.bsyms.back();
    REQUIRE(rms.op == OpId::RmsNorm);
    const std::vector<BoundSymbol>& d = rms.subsymbols;
    REQUIRE(d.size() >= 3);
    // First the upcast of x, last the weight times the normalized x cast back.
    CHECK(d.front().op == OpId::ConvertElementType);
    CHECK(d.front().outputs[0].type.dtype == DType::f32);
    CHECK(d.back().op == OpId::Mul);
    CHECK(d.back().outputs[0].type.dtype == dt);
    int converts = 0;
    for (const BoundSymbol& s : d) {
      if (s.op == OpId::Sum || s.op == OpId::Rsqrt) CHECK(s.outputs[0].type.dtype == DType::f32);
      if (s.op == OpId::ConvertElementType && ++converts == 2) CHECK(s.outputs[0].type.dtype == dt);
    }
    CHECK(converts == 2);
  }
  // f32 stays f32 throughout: no conversions at all.
  const Trace t = one_op(OpId::RmsNorm, {4, 6}, DType::f32);
  CHECK_FALSE(has_op(t.bsyms, OpId::ConvertElementType));
}

TEST_CASE("llama ops: the CPU kernels of sin, cos, silu and rms_norm against the reference", "[llama_ops][cpu]") {
  std::mt19937 rng(11);
  for (const Shape& shape : kShapes)
    for (OpId op : {OpId::Sin, OpId::Cos, OpId::Silu, OpId::RmsNorm}) {
      // Without the decomposition: the executor's own kernel runs.
      const Trace t = one_op(op, shape, DType::f32, false);
      INFO(op_name(op) << " on " << shape_str(shape));
      const test::Outcome o = test::fused_vs_reference(t, rng, -6.0, 6.0, -1.0);
      CHECK(o.regions == 0);
      INFO(o.worst_at);
      CHECK(o.worst < 2e-6);
    }
  // Rows far from zero and a tiny eps: the mean square must not lose them.
  Trace t = one_op(OpId::RmsNorm, {16, 768}, DType::f32, false, 1e-12);
  const test::Outcome o = test::fused_vs_reference(t, rng, 1000.0, 1001.0, -1.0);
  CHECK(o.worst < 2e-6);
}

TEST_CASE("llama ops: silu, rms_norm, sin and cos fuse into one region each, within 1e-6", "[llama_ops][fusion]") {
  std::mt19937 rng(22);
  for (const Shape& shape : kShapes)
    for (OpId op : {OpId::Silu, OpId::RmsNorm, OpId::Sin, OpId::Cos}) {
      const Trace t = op == OpId::Sin || op == OpId::Cos
                          ? [&] {
                              // A prim fuses with its neighbours: sin(x) * 2 + 1.
                              Trace u;
                              TraceBuilder b(u);
                              const Proxy x = b.add_arg(test::arg("x", test::tt(shape)));
                              const Proxy s = b.emit1(op, {of(x)});
                              const Proxy m = b.emit1(OpId::Mul, {of(s), Operand::lit(2.0)});
                              const Proxy y = b.emit1(OpId::Add, {of(m), Operand::lit(1.0)});
                              u.returns = ReturnTree::tuple({ReturnTree::leaf(y.name)});
                              return u;
                            }()
                          : one_op(op, shape);
      INFO(op_name(op) << " on " << shape_str(shape));
      const test::Outcome o = test::fused_vs_reference(t, rng, -4.0, 4.0, -1.0);
      if (numel(shape) > 0) CHECK(o.regions == 1);
      // The composites run as their decomposition in the region, not their kernel.
      for (const BoundSymbol& b : o.fused.bsyms) CHECK(b.op != op);
      INFO(o.worst_at);
      CHECK(o.worst < 1e-6);
    }
}

namespace {

// loss = sum(f(x)^2 * exp(g)): its joint trace holds f's VJP rule.
Trace joint(OpId op, const Shape& shape) {
  Trace t;
  TraceBuilder b(t);
  auto param = [&](const std::string& name, const Shape& s) {
    Proxy p = test::arg(name, test::tt(s));
    p.param_path = name;
    p.requires_grad = true;
    return b.add_arg(p);
  };
  const Proxy x = param("x", shape);
  Proxy y;
  if (op == OpId::RmsNorm)
    y = b.emit1(op, {of(x), of(param("w", {shape.back()}))}, {{"eps", 1e-6}});
  else
    y = b.emit1(op, {of(x)});
  const Proxy g = b.add_arg(test::arg("g", test::tt(shape)));
  IntList all;
  for (size_t d = 0; d < shape.size(); ++d) all.push_back(static_cast<int64_t>(d));
  const Proxy e = b.emit1(OpId::Exp, {of(g)});
  const Proxy loss = b.emit1(OpId::Sum, {of(b.emit1(OpId::Mul, {of(b.emit1(OpId::Mul, {of(y), of(y)})), of(e)}))},
                             {{"dims", all}});
  t.returns = ReturnTree::tuple({ReturnTree::leaf(loss.name)});
  return grad(t);
}

}  // namespace

TEST_CASE("llama ops: the VJPs of silu, rms_norm, sin and cos through regions, within 1e-6", "[llama_ops][fusion]") {
  std::mt19937 rng(23);
  for (const Shape& shape : {Shape{37, 129}, Shape{3, 5, 1}, Shape{1, 1}, Shape{2, 3, 33}, Shape{3000, 5}})
    for (OpId op : {OpId::Silu, OpId::RmsNorm, OpId::Sin, OpId::Cos}) {
      // A row of one element: x rstd is ±1 up to eps, so gx = g w eps / (x^2 + eps)^1.5
      // is a difference of nearly equal terms in f32, fused or not (PyTorch's too).
      if (op == OpId::RmsNorm && shape.back() == 1) continue;
      const Trace t = joint(op, shape);
      INFO(op_name(op) << " on " << shape_str(shape));
      const test::Outcome o = test::fused_vs_reference(t, rng, -2.0, 2.0, -1.0);
      CHECK(o.regions >= 1);
      INFO(o.worst_at);
      CHECK(o.worst < 1e-6);
    }
}

TEST_CASE("llama ops: the frontend records sin, cos, silu and rms_norm as single ops", "[llama_ops][frontend]") {
  Tracer tr;
  Tensor x = tr.input("x", {2, 3, 8});
  Tensor w = tr.param("norm.weight", {8});
  // One op per statement: C++ leaves the order of a call's arguments open.
  Tensor a = silu(x);
  Tensor s = sin(x);
  Tensor c = cos(x);
  Tensor y = rms_norm(a + s * c, w, 1e-5);
  CHECK(y.shape() == Shape{2, 3, 8});
  CHECK_THROWS_WITH(rms_norm(x, tr.param("bad.weight", {7}), 1e-5), Catch::Contains("rms_norm: w is f32[7]"));
  CHECK_THROWS_WITH(silu(tr.input("idx", {3}, DType::i64)), Catch::Contains("silu"));
  const Trace t = tr.finish({y});
  std::vector<OpId> ops;
  for (const BoundSymbol& b : t.bsyms) ops.push_back(b.op);
  CHECK(ops == std::vector<OpId>{OpId::Silu, OpId::Sin, OpId::Cos, OpId::Mul, OpId::Add, OpId::RmsNorm});
  CHECK(t.bsyms.back().attrs.get_double("eps") == 1e-5);
}

// Run by hand (`llama_ops_test "[llama_ops_bench]"`): silu and rms_norm
// forward, and forward+backward, over [4096, 2048], as the CPU executor's
// kernel (fusion none) vs decomposed into regions (fusion auto), in process
// CPU time. For people; nothing is checked.
TEST_CASE("llama ops: silu and rms_norm, kernel vs fused", "[.][llama_ops_bench]") {
  auto cpu_seconds = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  std::mt19937 rng(5);
  const Shape shape{4096, 2048};
  for (OpId op : {OpId::Silu, OpId::RmsNorm})
    for (bool backward : {false, true}) {
      const Trace t = backward ? joint(op, shape) : one_op(op, shape);
      const std::vector<reference::Value> args = test::random_args(t, rng, -2.0, 2.0);
      for (FusionMode mode : {FusionMode::none, FusionMode::automatic, FusionMode::none, FusionMode::automatic}) {
        const Trace exec = claim(t, {&cpu_executor()});
        const Trace run_trace = mode == FusionMode::automatic ? fuse(exec, Target::cpu) : insert_dels(exec);
        Allocator alloc;
        KernelContext ctx;
        Interpreter interp(alloc, {&cpu_executor()}, ctx);
        std::vector<TensorValue> in;
        for (const reference::Value& a : args) in.push_back(test::write(alloc, a.type, a.data));
        interp.run(run_trace, in);  // compiles
        const double c0 = cpu_seconds();
        for (int i = 0; i < 10; ++i) interp.run(run_trace, in);
        std::printf("%s %s [4096, 2048] fusion %s: %.2f ms CPU per run (%d threads), %d regions\n",
                    std::string(op_name(op)).c_str(), backward ? "fwd+bwd" : "fwd", std::string(fusion_mode_name(mode)).c_str(),
                    1e2 * (cpu_seconds() - c0), cpu_threads(), test::count_regions(run_trace));
      }
    }
}
