// The scalar expression table (ir/scalar_exprs.def) as the one definition of
// the elementwise ops: every op of ops.def's elementwise group is checked
// from the table, without a list in this file, so a new op is covered by its
// row alone. The CPU executor's generated kernel (expr_kernel, the kernel of
// an op with no hand-written one) runs each op's kernel formulation against
// the reference executor's float64 evaluation of its definition, on shapes
// that take the parallel path and on empty and rank-0 ones, with tensor and
// literal operands.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "executors/cpu/cpu_kernels.h"
#include "executors/reference/reference.h"
#include "ir/builder.h"
#include "ir/scalar_expr.h"
#include "test/fusion_check.h"

using namespace fsdpc;
using namespace fsdpc::test;

namespace {

std::vector<OpId> elementwise_ops() {
  std::vector<OpId> ops;
  for (int i = 0; i < kNumOps; ++i)
    if (op_info(static_cast<OpId>(i)).category == OpCategory::elementwise) ops.push_back(static_cast<OpId>(i));
  return ops;
}

// Runs `t`'s one statement through cpu::expr_kernel and returns its output.
std::vector<double> run_expr_kernel(const Trace& t, const std::vector<reference::Value>& args) {
  Allocator alloc;
  KernelContext ctx;
  const BoundSymbol& b = t.bsyms.at(0);
  std::vector<TensorValue> held;
  for (const reference::Value& a : args) held.push_back(write(alloc, a.type, a.data));
  std::vector<TensorView> in;
  size_t next = 0;
  for (const Operand& o : b.inputs) {
    if (o.is_scalar()) {
      in.push_back(TensorView{});
      continue;
    }
    in.push_back(TensorView{held.at(next).data(), &held.at(next).type});
    ++next;
  }
  TensorValue out = allocate_tensor(alloc, b.output().type, MemCategory::activations);
  cpu::expr_kernel(ctx, b, in, {TensorView{out.data(), &out.type}});
  return read(out);
}

// Worst relative error of `got` against `want`; NaN must match NaN, and an
// infinity must be the same infinity.
double worst_error(const std::vector<double>& got, const std::vector<double>& want, std::string& where) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    INFO("element " << i << ": got " << g << ", want " << w);
    if (std::isnan(w) || std::isnan(g)) {
      CHECK(std::isnan(w) == std::isnan(g));
      continue;
    }
    if (std::isinf(w) || std::isinf(g)) {
      CHECK(g == w);
      continue;
    }
    const double err = std::abs(g - w) / std::max(std::abs(w), 1e-30);
    if (err > worst) {
      worst = err;
      where = "element " + std::to_string(i) + ": got " + std::to_string(g) + ", want " + std::to_string(w);
    }
  }
  return worst;
}

}  // namespace

TEST_CASE("scalar table: every elementwise op of ops.def has a definition whose kind fits its arity",
          "[scalar_table]") {
  const std::vector<OpId> ops = elementwise_ops();
  REQUIRE(ops.size() >= 20);
  for (OpId op : ops) {
    INFO(op_name(op));
    REQUIRE(scalar_definition(op));
    REQUIRE(scalar_expr(op));
    const ElementwiseKind k = elementwise_kind(op);
    const int n = op_info(op).min_inputs;
    switch (k) {
      case ElementwiseKind::unary:
      case ElementwiseKind::cast: CHECK(n == 1); break;
      case ElementwiseKind::binary:
      case ElementwiseKind::compare: CHECK(n == 2); break;
      case ElementwiseKind::select: CHECK(n == 3); break;
      case ElementwiseKind::none: FAIL("no kind"); break;
    }
  }
  for (int i = 0; i < kNumOps; ++i)
    if (op_info(static_cast<OpId>(i)).category != OpCategory::elementwise)
      CHECK(elementwise_kind(static_cast<OpId>(i)) == ElementwiseKind::none);
}

TEST_CASE("scalar table: every elementwise op's generated CPU kernel matches the reference to 1e-6",
          "[scalar_table]") {
  std::mt19937 rng(21);
  int checked = 0;
  for (OpId op : elementwise_ops()) {
    const ElementwiseKind kind = elementwise_kind(op);
    if (kind == ElementwiseKind::cast) continue;  // convert_element_type: every dtype pair, its own kernel
    const int arity = op_info(op).min_inputs;
    // Inputs positive (log, sqrt, pow's base) and signed (tanh's odd branch,
    // sigmoid's tail, NaN from log of a negative on both sides).
    for (const auto& [lo, hi] : {std::pair{0.25, 2.0}, std::pair{-9.0, 9.0}})
      for (const Shape& shape : {Shape{37, 129}, Shape{300, 257}, Shape{}, Shape{4, 0, 3}})
        for (int literal = -1; literal < arity; ++literal) {  // -1: all tensors; k: input k a literal
          if (literal >= 0 && (kind == ElementwiseKind::unary || (kind == ElementwiseKind::select && literal == 0)))
            continue;
          Trace t;
          TraceBuilder b(t);
          std::vector<Operand> ins;
          for (int k = 0; k < arity; ++k) {
            if (k == literal) {
              ins.push_back(Operand::lit(op == OpId::Pow ? 1.5 : 0.75));
              continue;
            }
            const bool cond = kind == ElementwiseKind::select && k == 0;
            ins.push_back(Operand::of(
                b.add_arg(arg("x" + std::to_string(k), tt(shape, cond ? DType::boolean : DType::f32))).name));
          }
          const Proxy r = b.emit1(op, ins);
          t.returns = ReturnTree::leaf(r.name);
          std::vector<reference::Value> args = random_args(t, rng, lo, hi);
          // Comparisons see ties: values on a grid of quarters.
          if (kind == ElementwiseKind::compare)
            for (reference::Value& v : args)
              for (double& x : v.data) x = std::round(x * 4) / 4;
          INFO(op_name(op) << " on " << shape_str(shape) << " in [" << lo << ", " << hi << "]"
                           << (literal >= 0 ? ", input " + std::to_string(literal) + " a literal" : ""));
          const std::vector<reference::Value> want = reference::run(t, args);
          std::string where;
          const double worst = worst_error(run_expr_kernel(t, args), want.at(0).data, where);
          INFO(where);
          CHECK(worst < 1e-6);
          ++checked;
        }
  }
  CHECK(checked > 100);
}

TEST_CASE("scalar table: a new op needs no executor code: sigmoid runs claimed on the CPU and fused",
          "[scalar_table]") {
  // sigmoid has a row in ops.def and scalar_exprs.def and a VJP rule, and no
  // kernel family: the CPU claims it through its scalar expression.
  std::mt19937 rng(22);
  Trace t;
  TraceBuilder b(t);
  const Proxy x = b.add_arg(arg("x", tt({64, 33})));
  const Proxy s = b.emit1(OpId::Sigmoid, {Operand::of(x.name)});
  t.returns = ReturnTree::leaf(s.name);
  const Trace claimed = claim(t, {&cpu_executor()});
  REQUIRE(claimed.bsyms.size() == 1);
  CHECK(claimed.bsyms[0].executor == "cpu");
  const std::vector<reference::Value> args = random_args(t, rng, -20.0, 20.0);
  std::string where;
  CHECK(worst_error(run_on_cpu(claimed, args).at(0).data, reference::run(t, args).at(0).data, where) < 1e-6);
  // With a second statement it forms a region, lowered from the same row.
  Trace t2;
  TraceBuilder b2(t2);
  const Proxy x2 = b2.add_arg(arg("x", tt({64, 33})));
  const Proxy s2 = b2.emit1(OpId::Sigmoid, {Operand::of(x2.name)});
  t2.returns = ReturnTree::leaf(b2.emit1(OpId::Mul, {Operand::of(s2.name), Operand::of(x2.name)}).name);
  const Outcome o = fused_vs_reference(t2, rng, -20.0, 20.0);
  CHECK(o.regions == 1);
  CHECK(o.worst < 1e-6);
}
