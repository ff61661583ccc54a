// Reductions over the innermost dimension inside fusion regions, against the
// float64 reference executor: sum and amax as row values (NaN rows, empty
// rows, size-1 rows, odd row lengths, many rows over threads), the composites
// a region holds whole (layer_norm, softmax, gelu), and the backward of
// layer_norm, softmax, gelu and cross_entropy from their VJP rules. bf16
// around them, as autocast puts it: row sums and amax of bf16 loads (exact),
// softmax from bf16 to bf16 and layer_norm to bf16, each output the bf16
// rounding of the f32 value the region computes.
#include <catch2/catch.hpp>

#include <time.h>

#include <cstdio>
#include <random>

#include "executors/fusion/fusion_kernel.h"
#include "executors/fusion/llvm_jit.h"
#include "ir/builder.h"
#include "passes/del.h"
#include "passes/grad.h"
#include "test/fusion_check.h"

using namespace fsdpc;
using namespace fsdpc::test;

namespace {

// Odd row lengths (not multiples of any vector width), size-1 and empty
// dims, and enough rows for the kernel to split them over threads.
const std::vector<Shape> kShapes = {{37, 129}, {300, 257}, {5, 1}, {1, 1}, {4, 0}, {0, 7},
                                    {2, 3, 33}, {21000, 3}, {7, 1001}, {9}};

Operand of(const Proxy& p) { return Operand::of(p.name); }

int regions_with(const Trace& t, OpId op) {
  int n = 0;
  for (const BoundSymbol& b : t.bsyms) {
    if (b.op != OpId::Fusion) continue;
    for (const BoundSymbol& s : b.subsymbols)
      if (s.op == op) {
        ++n;
        break;
      }
  }
  return n;
}

bool has_op(const Trace& t, OpId op) {
  for (const BoundSymbol& b : t.bsyms)
    if (b.op == op) return true;
  return false;
}

}  // namespace

TEST_CASE("fusion: sum and amax over the row are row values of a region", "[fusion]") {
  std::mt19937 rng(21);
  for (const Shape& shape : kShapes) {
    Trace t;
    TraceBuilder b(t);
    const int64_t last = static_cast<int64_t>(shape.size()) - 1;
    const Proxy x = b.add_arg(arg("x", tt(shape)));
    // log(x - 1) is NaN for x < 1: some rows' amax is NaN, as in torch.
    const Proxy l = b.emit1(OpId::Log, {of(b.emit1(OpId::Sub, {of(x), Operand::lit(1.0)}))});
    const Proxy e = b.emit1(OpId::Exp, {of(x)});
    const Proxy s = b.emit1(OpId::Sum, {of(e)}, {{"dims", IntList{last}}});
    const Proxy m = b.emit1(OpId::Amax, {of(l)}, {{"dims", IntList{last}}});
    const Proxy mx = b.emit1(OpId::Amax, {of(x)}, {{"dims", IntList{last}}});
    const Proxy r = b.emit1(OpId::Div, {of(s), Operand::lit(3.0)});
    IntList bd;
    for (int64_t d = 0; d < last; ++d) bd.push_back(d);
    const Proxy back = b.emit1(OpId::BroadcastInDim, {of(r)}, {{"shape", IntList(shape.begin(), shape.end())},
                                                               {"broadcast_dims", bd}});
    const Proxy y = b.emit1(OpId::Mul, {of(e), of(back)});
    t.returns = ReturnTree::tuple({ReturnTree::leaf(s.name), ReturnTree::leaf(m.name), ReturnTree::leaf(mx.name),
                                   ReturnTree::leaf(y.name)});
    INFO("shape " << shape_str(shape));
    const Outcome o = fused_vs_reference(t, rng, 0.0, 2.0);
    CHECK(o.regions == 1);
    CHECK(o.worst < 1e-6);
  }
}

TEST_CASE("fusion: layer_norm, softmax and gelu run as one region each, within 1e-6", "[fusion]") {
  std::mt19937 rng(22);
  for (const Shape& shape : kShapes) {
    const int64_t last = static_cast<int64_t>(shape.size()) - 1;
    for (OpId op : {OpId::LayerNorm, OpId::Softmax, OpId::Gelu}) {
      Trace t;
      TraceBuilder b(t);
      const Proxy x = b.add_arg(arg("x", tt(shape)));
      Proxy y;
      if (op == OpId::LayerNorm) {
        const Proxy w = b.add_arg(arg("w", tt({shape.back()})));
        const Proxy c = b.add_arg(arg("c", tt({shape.back()})));
        y = b.emit1(op, {of(x), of(w), of(c)}, {{"eps", 1e-5}});
      } else if (op == OpId::Softmax) {
        y = b.emit1(op, {of(x)}, {{"dim", last}});
      } else {
        y = b.emit1(op, {of(x)}, {{"approximate", std::string("tanh")}});
      }
      t.returns = ReturnTree::tuple({ReturnTree::leaf(y.name)});
      INFO(op_name(op) << " on " << shape_str(shape));
      const Outcome o = fused_vs_reference(t, rng, -2.0, 2.0, -1.0);
      CHECK(o.regions == 1);
      CHECK_FALSE(has_op(o.fused, op));  // the decomposition, not the kernel
      CHECK(o.worst < 1e-6);
    }
  }
}

namespace {

// loss = sum(f(x)^2 * exp(g)) for a composite f; its joint forward+backward trace
// (passes/grad.h) holds the VJP rule's statements.
Trace joint(OpId op, const Shape& shape) {
  Trace t;
  TraceBuilder b(t);
  const int64_t last = static_cast<int64_t>(shape.size()) - 1;
  auto param = [&](const std::string& name, const Shape& s) {
    Proxy p = arg(name, tt(s));
    p.param_path = name;
    p.requires_grad = true;
    return b.add_arg(p);
  };
  const Proxy x = param("x", shape);
  IntList all;
  for (size_t d = 0; d < shape.size(); ++d) all.push_back(static_cast<int64_t>(d));
  Proxy loss;
  if (op == OpId::CrossEntropy) {
    const Proxy targets = b.add_arg(arg("targets", tt(Shape(shape.begin(), shape.end() - 1), DType::i64)));
    loss = b.emit1(op, {of(x), of(targets)});
  } else {
    Proxy y;
    if (op == OpId::LayerNorm) {
      const Proxy w = param("w", {shape.back()});
      const Proxy c = param("c", {shape.back()});
      y = b.emit1(op, {of(x), of(w), of(c)}, {{"eps", 1e-5}});
    } else if (op == OpId::Softmax) {
      y = b.emit1(op, {of(x)}, {{"dim", last}});
    } else {
      y = b.emit1(op, {of(x)}, {{"approximate", std::string("tanh")}});
    }
    const Proxy g = b.add_arg(arg("g", tt(shape)));
    // Positive terms, so that the loss itself does not cancel in f32.
    const Proxy w = b.emit1(OpId::Exp, {of(g)});
    loss = b.emit1(OpId::Sum, {of(b.emit1(OpId::Mul, {of(b.emit1(OpId::Mul, {of(y), of(y)})), of(w)}))},
                   {{"dims", all}});
  }
  t.returns = ReturnTree::tuple({ReturnTree::leaf(loss.name)});
  return grad(t);
}

}  // namespace

TEST_CASE("fusion: the VJPs of layer_norm, softmax, gelu and cross_entropy through regions, within 1e-6",
          "[fusion]") {
  std::mt19937 rng(23);
  for (const Shape& shape : {Shape{37, 129}, Shape{3, 5, 1}, Shape{64, 257}, Shape{1, 1}, Shape{2, 3, 33},
                             Shape{12000, 5}}) {
    for (OpId op : {OpId::LayerNorm, OpId::Softmax, OpId::Gelu, OpId::CrossEntropy}) {
      if (op == OpId::CrossEntropy && shape.back() < 3) continue;  // targets are 0..2
      const Trace t = joint(op, shape);
      INFO(op_name(op) << " on " << shape_str(shape) << "\n" << print_trace(t));
      // Errors relative to each gradient's largest entry: a gradient's small
      // entries are differences of large ones, in f32 fused or not.
      const Outcome o = fused_vs_reference(t, rng, -2.0, 2.0, -1.0);
      CHECK(o.regions >= 1);
      if (op != OpId::Gelu) CHECK(regions_with(o.fused, OpId::Sum) >= 1);  // a row reduction was fused
      INFO(o.worst_at);
      CHECK(o.worst < 1e-6);
      std::printf("%s %s: %d regions, worst %.2e\n", std::string(op_name(op)).c_str(), shape_str(shape).c_str(),
                  o.regions, o.worst);
    }
  }
}

TEST_CASE("fusion: a row reduction loop is vectorised", "[fusion]") {
  Trace t;
  TraceBuilder b(t);
  const Proxy x = b.add_arg(arg("x", tt({64, 1024})));
  const Proxy s = b.emit1(OpId::Sum, {of(b.emit1(OpId::Exp, {of(x)}))}, {{"dims", IntList{1}}});
  const Proxy m = b.emit1(OpId::Amax, {of(x)}, {{"dims", IntList{1}}});
  const Proxy y = b.emit1(OpId::Sub, {of(s), of(m)});
  t.returns = ReturnTree::tuple({ReturnTree::leaf(y.name)});
  const Trace fused = fuse(claim(t, {&cpu_executor()}), Target::cpu);
  REQUIRE(count_regions(fused) == 1);
  fusion::LlvmJit jit;
  const fusion::Region region = fusion::describe_region(fused.bsyms[0], {x.type});
  CHECK(region.steps.back().row);
  const std::string ir = jit.optimized_ir(region);
  INFO(ir);
  CHECK(ir.find("x double>") != std::string::npos);  // the f64 partial sums, one per lane
  CHECK(ir.find("x float>") != std::string::npos);
}

namespace {

// A random DAG over [rows..., cols] with row reductions and broadcasts back
// mixed into the elementwise ops, values kept bounded (tanh) so that f32
// rounding stays comparable with the float64 reference. Row values join
// element values only through a broadcast back, as the VJP rules build them.
Trace random_row_dag(std::mt19937& rng) {
  const std::vector<int64_t> sizes = {0, 1, 2, 3, 7, 17, 40};
  Shape shape(1 + rng() % 3);
  for (int64_t& d : shape) d = sizes[rng() % sizes.size()];
  const int64_t last = static_cast<int64_t>(shape.size()) - 1;
  const Shape row(shape.begin(), shape.end() - 1);
  IntList back_dims;
  for (int64_t d = 0; d < last; ++d) back_dims.push_back(d);
  Trace t;
  TraceBuilder b(t);
  std::vector<std::string> elems, rows;
  elems.push_back(b.add_arg(arg("x", tt(shape))).name);
  if (rng() % 2) rows.push_back(b.add_arg(arg("r", tt(row))).name);
  auto pick = [&](const std::vector<std::string>& v) { return Operand::of(v[rng() % v.size()]); };
  const int n = 3 + static_cast<int>(rng() % 10);
  for (int i = 0; i < n; ++i) {
    switch (rng() % 7) {
      case 0: elems.push_back(b.emit1(OpId::Add, {pick(elems), pick(elems)}).name); break;
      case 1: elems.push_back(b.emit1(OpId::Tanh, {Operand::of(b.emit1(OpId::Mul, {pick(elems), pick(elems)}).name)}).name); break;
      case 2:
        rows.push_back(b.emit1(OpId::Sum, {pick(elems)}, {{"dims", IntList{last}}}).name);
        break;
      case 3:
        rows.push_back(b.emit1(OpId::Amax, {pick(elems)}, {{"dims", IntList{last}}}).name);
        break;
      case 4:
        if (!rows.empty()) rows.push_back(b.emit1(OpId::Tanh, {Operand::of(b.emit1(OpId::Sub, {pick(rows), Operand::lit(0.5)}).name)}).name);
        break;
      default:
        if (!rows.empty()) {
          const Proxy bb = b.emit1(OpId::BroadcastInDim, {pick(rows)},
                                   {{"shape", IntList(shape.begin(), shape.end())}, {"broadcast_dims", back_dims}});
          elems.push_back(b.emit1(OpId::Sub, {pick(elems), Operand::of(bb.name)}).name);
        }
        break;
    }
  }
  std::vector<ReturnTree> rets = {ReturnTree::leaf(elems.back())};
  if (!rows.empty()) rets.push_back(ReturnTree::leaf(rows.back()));
  t.returns = ReturnTree::tuple(std::move(rets));
  return t;
}

}  // namespace

TEST_CASE("fusion: random DAGs with row reductions and broadcasts back match the reference", "[fusion]") {
  std::mt19937 rng(2025);
  int with_reduction = 0;
  for (int trial = 0; trial < 150; ++trial) {
    const Trace t = random_row_dag(rng);
    INFO("trial " << trial << "\n" << print_trace(t));
    const Outcome o = fused_vs_reference(t, rng, -1.5, 1.5, 1.0);
    INFO(o.worst_at);
    CHECK(o.worst < 1e-5);
    with_reduction += regions_with(o.fused, OpId::Sum) + regions_with(o.fused, OpId::Amax) > 0;
  }
  CHECK(with_reduction > 50);
}

// Run by hand (`fusion_reduction_test "[fusion_bench]"`): the forward and
// backward of layer_norm, softmax, gelu and cross_entropy over 4096 x 512,
// fused vs the CPU executor's kernels, in process CPU time (steadier than
// wall time on a shared machine). For people; nothing is checked.
TEST_CASE("fusion: norms and their VJPs, fused vs unfused", "[.][fusion_bench]") {
  auto cpu_seconds = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  std::mt19937 rng(5);
  for (OpId op : {OpId::LayerNorm, OpId::Softmax, OpId::Gelu, OpId::CrossEntropy}) {
    const Trace t = joint(op, {4096, 512});
    const std::vector<reference::Value> args = random_args(t, rng, -2.0, 2.0);
    for (FusionMode mode : {FusionMode::none, FusionMode::automatic, FusionMode::none, FusionMode::automatic}) {
      const Trace exec = claim(t, {&cpu_executor()});
      const Trace run_trace = mode == FusionMode::automatic ? fuse(exec, Target::cpu) : insert_dels(exec);
      Allocator alloc;
      KernelContext ctx;
      Interpreter interp(alloc, {&cpu_executor()}, ctx);
      std::vector<TensorValue> in;
      for (const reference::Value& a : args) in.push_back(write(alloc, a.type, a.data));
      interp.run(run_trace, in);  // compiles
      const double c0 = cpu_seconds();
      for (int i = 0; i < 10; ++i) interp.run(run_trace, in);
      std::printf("%s fwd+bwd [4096, 512] fusion %s: %.2f ms CPU per run (%d threads), %d regions\n",
                  std::string(op_name(op)).c_str(), std::string(fusion_mode_name(mode)).c_str(), 1e2 * (cpu_seconds() - c0), cpu_threads(),
                  count_regions(run_trace));
    }
  }
}

namespace {

Proxy convert(TraceBuilder& b, const Proxy& x, DType to) {
  return b.emit1(OpId::ConvertElementType, {of(x)}, Attrs{{"dtype", std::string(dtype_name(to))}});
}

std::vector<float> as_floats(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

}  // namespace

// A bf16 attention score -> f32 -> softmax -> bf16, with the row sum and
// amax of the widened scores as f32 row outputs: the sum of bf16 values is
// exact in the f64 accumulator, so sum and amax match the host bit for bit;
// each probability must be the bf16 rounding of a value within 1e-6 (of
// max(p, 1/cols)) of the float64 softmax.
TEST_CASE("fusion: row sums and amax of bf16 loads, softmax from bf16 to bf16", "[fusion][bf16]") {
  std::mt19937 rng(41);
  for (const Shape& shape : kShapes) {
    INFO("shape " << shape_str(shape));
    const int64_t last = static_cast<int64_t>(shape.size()) - 1;
    const size_t cols = static_cast<size_t>(shape.back()), n = static_cast<size_t>(numel(shape));
    Trace t;
    TraceBuilder b(t);
    const Proxy h = b.add_arg(arg("h", tt(shape, DType::bf16)));
    const Proxy hf = convert(b, h, DType::f32);
    const Proxy sm = b.emit1(OpId::Sum, {of(hf)}, {{"dims", IntList{last}}});
    const Proxy mx = b.emit1(OpId::Amax, {of(hf)}, {{"dims", IntList{last}}});
    const Proxy p = convert(b, b.emit1(OpId::Softmax, {of(hf)}, {{"dim", last}}), DType::bf16);
    t.returns = ReturnTree::tuple({ReturnTree::leaf(sm.name), ReturnTree::leaf(mx.name), ReturnTree::leaf(p.name)});
    const Trace fused = fuse_bf16(t);
    INFO(print_trace(fused));
    REQUIRE(count_regions(fused) == 1);
    CHECK_FALSE(has_op(fused, OpId::Softmax));
    std::uniform_real_distribution<float> u(-6, 6);
    std::vector<float> hv(n);
    for (float& x : hv) x = round_to_bf16(u(rng));
    const std::vector<std::vector<float>> got = run_bits(fused, {hv});
    REQUIRE(got.size() == 3);
    int bad = 0;
    for (size_t r = 0; cols > 0 && r < n / cols; ++r) {
      double sum = 0, mx_want = -INFINITY;
      for (size_t j = 0; j < cols; ++j) {
        sum += hv[r * cols + j];
        mx_want = std::max<double>(mx_want, hv[r * cols + j]);
      }
      CHECK(bits(got[0][r]) == bits(static_cast<float>(sum)));
      CHECK(bits(got[1][r]) == bits(static_cast<float>(mx_want)));
      double z = 0;
      for (size_t j = 0; j < cols; ++j) z += std::exp(hv[r * cols + j] - mx_want);
      for (size_t j = 0; j < cols; ++j) {
        const double want = std::exp(hv[r * cols + j] - mx_want) / z;
        if (!bf16_rounding_within(got[2][r * cols + j], want, 1e-6, 1.0 / static_cast<double>(cols)) && ++bad <= 10)
          FAIL_CHECK("row " << r << " col " << j << ": got " << got[2][r * cols + j] << ", want bf16 of " << want);
      }
    }
    if (cols == 0)  // empty rows still have their row values
      for (size_t r = 0; r < got[0].size(); ++r) CHECK((got[0][r] == 0 && got[1][r] == -INFINITY));
    CHECK(bad == 0);
  }
}

// layer_norm -> convert(bf16), the operand of the next matmul: one region,
// the f32 normalised value never stored unless it is read elsewhere. With
// it returned as well, the bf16 output is its rounding, bit for bit (the
// statistics stay in f64, the value is rounded to f32 and then to bf16, as
// the unfused trace stores it); without it, the bf16 output is the rounding
// of a value within 1e-6 (of the output's largest) of the float64 reference.
TEST_CASE("fusion: layer_norm -> bf16 is one region storing bf16, rounded from its f32 value", "[fusion][bf16]") {
  std::mt19937 rng(42);
  for (const Shape& shape : kShapes) {
    for (bool keep_f32 : {true, false}) {
      INFO("shape " << shape_str(shape) << (keep_f32 ? ", f32 output too" : ""));
      Trace t;
      TraceBuilder b(t);
      const Proxy x = b.add_arg(arg("x", tt(shape)));
      const Proxy w = b.add_arg(arg("w", tt({shape.back()})));
      const Proxy c = b.add_arg(arg("c", tt({shape.back()})));
      const Proxy y = b.emit1(OpId::LayerNorm, {of(x), of(w), of(c)}, {{"eps", 1e-5}});
      const Proxy yb = convert(b, y, DType::bf16);
      std::vector<ReturnTree> rets = {ReturnTree::leaf(yb.name)};
      if (keep_f32) rets.push_back(ReturnTree::leaf(y.name));
      t.returns = ReturnTree::tuple(std::move(rets));
      const Trace fused = fuse_bf16(t);
      INFO(print_trace(fused));
      REQUIRE(count_regions(fused) == 1);
      REQUIRE(fused.bsyms[0].op == OpId::Fusion);
      CHECK(fused.bsyms[0].outputs.size() == (keep_f32 ? 2u : 1u));
      const std::vector<reference::Value> args = random_args(t, rng, -2.0, 2.0);
      const std::vector<reference::Value> want = reference::run(t, args);
      const std::vector<std::vector<float>> got =
          run_bits(fused, {as_floats(args[0].data), as_floats(args[1].data), as_floats(args[2].data)});
      double scale = 0;
      for (double v : want[0].data) scale = std::max(scale, std::abs(v));
      int bad = 0;
      for (size_t i = 0; i < got[0].size(); ++i) {
        const bool ok = keep_f32 ? bits(got[0][i]) == bits(round_to_bf16(got[1][i]))
                                 : bf16_rounding_within(got[0][i], want[0].data[i], 1e-6, scale);
        if (!ok && ++bad <= 10)
          FAIL_CHECK("element " << i << ": got " << got[0][i] << ", want bf16 of "
                                << (keep_f32 ? got[1][i] : want[0].data[i]));
      }
      CHECK(bad == 0);
    }
  }
}
