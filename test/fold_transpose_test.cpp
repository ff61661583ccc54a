// fold_transposes (passes/fold_transpose.h): a permute of the last two dims
// that only a cpu matmul reads runs inside that matmul, read through
// transposed strides; the folded matmul equals the float64 reference for a,
// b or both transposed, with batch dims, a b shared by every batch, and
// shapes large enough for oneDNN to pack b. What must not fold stays.
#include <catch2/catch.hpp>

#include <random>

#include "executors/claim.h"
#include "ir/builder.h"
#include "ir/json.h"
#include "ir/parser.h"
#include "passes/fold_transpose.h"
#include "runtime/planner/step_simulator.h"
#include "test/fusion_check.h"

using namespace fsdpc;
using namespace fsdpc::test;

namespace {

Operand of(const Proxy& p) { return Operand::of(p.name); }

IntList swap_last_two(size_t rank) {
  IntList dims(rank);
  for (size_t i = 0; i < rank; ++i) dims[i] = static_cast<int64_t>(i);
  std::swap(dims[rank - 2], dims[rank - 1]);
  return dims;
}

Shape swapped(Shape s) {
  std::swap(s[s.size() - 2], s[s.size() - 1]);
  return s;
}

// out = op(a) @ op(b) for a [..., M, K] and b [..., K, N] or [K, N]: a
// transposed operand is an argument stored with its last two dims swapped
// and permuted back, as the matmul VJP writes it.
// Operands of `dtype`; a bf16 product may write f32 (out_dtype).
Trace matmul_trace(const Shape& a, const Shape& b, bool a_t, bool b_t, DType dtype = DType::f32,
                   bool wide_out = false) {
  Trace t;
  t.name = "f";
  TraceBuilder tb(t);
  Proxy x = tb.add_arg(arg("x", tt(a_t ? swapped(a) : a, dtype)));
  Proxy y = tb.add_arg(arg("y", tt(b_t ? swapped(b) : b, dtype)));
  if (a_t) x = tb.emit1(OpId::Permute, {of(x)}, {{"dims", swap_last_two(a.size())}});
  if (b_t) y = tb.emit1(OpId::Permute, {of(y)}, {{"dims", swap_last_two(b.size())}});
  Attrs attrs;
  if (wide_out) attrs.set("out_dtype", std::string("f32"));
  const Proxy out = tb.emit1(OpId::Matmul, {of(x), of(y)}, attrs);
  t.returns = ReturnTree::tuple({ReturnTree::leaf(out.name)});
  return t;
}

int count_op(const Trace& t, OpId op) {
  int n = 0;
  for (const BoundSymbol& b : t.bsyms) n += b.op == op;
  return n;
}

// Runs the execution trace of `t` under --fusion auto on the CPU executor
// and returns the worst error of its one output against the reference,
// relative to the output's largest magnitude.
double worst_error(const Trace& t, const Trace& exec, std::mt19937& rng) {
  const std::vector<reference::Value> args = random_args(t, rng, -1.0, 1.0);
  const std::vector<reference::Value> want = reference::run(t, args);
  const std::vector<reference::Value> got = run_on_cpu(exec, args);
  REQUIRE(got.size() == 1);
  REQUIRE(got[0].type == want[0].type);
  const std::vector<double>& g = got[0].data;
  double scale = 1e-30, worst = 0;
  for (double w : want[0].data) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - want[0].data[i]) / scale);
  return worst;
}

}  // namespace

TEST_CASE("fold_transposes: a folded matmul equals the reference for transposed a, b and both", "[fusion]") {
  struct Case {
    Shape a, b;
  };
  const std::vector<Case> cases = {
      {{3, 5}, {5, 4}},              // one matrix
      {{1, 1}, {1, 1}},              // size-1 dims: any stride is valid
      {{2, 3, 7, 5}, {2, 3, 5, 4}},  // batch dims on both
      {{2, 6, 5}, {5, 4}},           // b shared by every batch
      {{4, 7, 9}, {9, 3}},           // b shared, a transposed: b broadcast over the batch
      {{600, 32}, {32, 8}},          // 512 rows and more: oneDNN packs b first
      {{2, 520, 16}, {2, 16, 24}},   // packed b, batched
      {{3, 0}, {0, 4}},              // an empty sum: zeros
  };
  // f32; bf16 (f32 accumulation, one rounding of the output: 2^-9 of the
  // largest entry, plus the sum's own error); bf16 into f32 (out_dtype).
  struct Precision {
    DType dtype;
    bool wide_out;
    double bound;
  };
  std::mt19937 rng(11);
  for (const Precision& p : {Precision{DType::f32, false, 1e-5}, Precision{DType::bf16, false, 1e-2},
                             Precision{DType::bf16, true, 1e-5}})
  for (const Case& c : cases)
    for (int mode = 1; mode < 4; ++mode) {
      const bool a_t = mode & 1, b_t = mode & 2;
      const Trace t = matmul_trace(c.a, c.b, a_t, b_t, p.dtype, p.wide_out);
      const Trace exec = execution_trace(t, Target::cpu, FusionMode::automatic);
      INFO(print_trace(exec));
      REQUIRE_NOTHROW(verify(exec));
      // The permutes are gone from the top level, into the one region.
      CHECK(count_op(exec, OpId::Permute) == 0);
      REQUIRE(count_op(exec, OpId::Fusion) == 1);
      const BoundSymbol* region = nullptr;
      for (const BoundSymbol& b : exec.bsyms)
        if (b.op == OpId::Fusion) region = &b;
      const std::optional<TransposedMatmul> tm = transposed_matmul(*region);
      REQUIRE(tm);
      CHECK(tm->a_transposed == a_t);
      CHECK(tm->b_transposed == b_t);
      CHECK(region->executor == "cpu");
      CHECK(region->subsymbols.size() == static_cast<size_t>(1 + a_t + b_t));
      CHECK(parse_trace(print_trace(exec)) == exec);
      CHECK(trace_from_json(trace_to_json(exec)) == exec);
      // --fusion none keeps the permutes.
      CHECK(count_op(execution_trace(t, Target::cpu, FusionMode::none), OpId::Permute) == a_t + b_t);
      CHECK(worst_error(t, exec, rng) < p.bound);
    }
}

TEST_CASE("fold_transposes: the operand order of the region's inputs does not matter", "[fusion]") {
  // b's permute comes first, so the region's inputs are (y, x).
  Trace t;
  t.name = "f";
  TraceBuilder tb(t);
  const Proxy x = tb.add_arg(arg("x", tt({2, 5, 3})));
  const Proxy y = tb.add_arg(arg("y", tt({2, 4, 5})));
  const Proxy yt = tb.emit1(OpId::Permute, {of(y)}, {{"dims", IntList{0, 2, 1}}});
  const Proxy xt = tb.emit1(OpId::Permute, {of(x)}, {{"dims", IntList{0, 2, 1}}});
  const Proxy out = tb.emit1(OpId::Matmul, {of(xt), of(yt)});
  t.returns = ReturnTree::tuple({ReturnTree::leaf(out.name)});
  const Trace exec = execution_trace(t, Target::cpu, FusionMode::automatic);
  INFO(print_trace(exec));
  REQUIRE(count_op(exec, OpId::Fusion) == 1);
  const BoundSymbol& region = exec.bsyms[0];
  REQUIRE(region.inputs.size() == 2);
  CHECK(region.inputs[0].name == "y");
  const std::optional<TransposedMatmul> tm = transposed_matmul(region);
  REQUIRE(tm);
  CHECK((tm->a == 1 && tm->b == 0));
  std::mt19937 rng(5);
  CHECK(worst_error(t, exec, rng) < 1e-5);
}

TEST_CASE("fold_transposes: what must not fold stays as it was", "[fusion]") {
  std::mt19937 rng(7);
  SECTION("a permute that something besides a matmul reads") {
    Trace t;
    t.name = "f";
    TraceBuilder tb(t);
    const Proxy x = tb.add_arg(arg("x", tt({5, 3})));
    const Proxy y = tb.add_arg(arg("y", tt({5, 3})));
    const Proxy xt = tb.emit1(OpId::Permute, {of(x)}, {{"dims", IntList{1, 0}}});
    const Proxy m = tb.emit1(OpId::Matmul, {of(xt), of(y)});
    const Proxy n = tb.emit1(OpId::Neg, {of(xt)});
    t.returns = ReturnTree::tuple({ReturnTree::leaf(m.name), ReturnTree::leaf(n.name)});
    const Trace exec = execution_trace(t, Target::cpu, FusionMode::automatic);
    INFO(print_trace(exec));
    CHECK(count_op(exec, OpId::Permute) == 1);
    for (const BoundSymbol& b : exec.bsyms) CHECK(!transposed_matmul(b));
  }
  SECTION("a permute of other dims, or a returned one") {
    Trace t;
    t.name = "f";
    TraceBuilder tb(t);
    const Proxy x = tb.add_arg(arg("x", tt({3, 2, 5})));
    const Proxy y = tb.add_arg(arg("y", tt({2, 3, 5, 4})));
    const Proxy xp = tb.emit1(OpId::Permute, {of(x)}, {{"dims", IntList{1, 0, 2}}});  // [2, 3, 5]
    const Proxy yt = tb.emit1(OpId::Permute, {of(y)}, {{"dims", IntList{0, 1, 3, 2}}});
    const Proxy m = tb.emit1(OpId::Matmul, {of(xp), of(tb.emit1(OpId::Reshape, {of(x)}, {{"shape", IntList{5, 6}}}))});
    t.returns = ReturnTree::tuple({ReturnTree::leaf(m.name), ReturnTree::leaf(yt.name)});
    const Trace exec = execution_trace(t, Target::cpu, FusionMode::automatic);
    INFO(print_trace(exec));
    CHECK(count_op(exec, OpId::Permute) == 2);
    CHECK(count_op(exec, OpId::Fusion) == 0);
  }
  SECTION("a wait between the permute and its matmul") {
    const Trace t = parse_trace(R"(# Constructed by del
def f(x, w):
  # x: "cpu f32[5, 3]"
  # w: "cpu f32[4, 4]" fully_sharded
  t0 = permute(x, dims=[1, 0])  # t0: "cpu f32[3, 5]"
  ft1 = all_gather(w, group=dp, size=2, dim=0)  # ft1: "FUTURE cpu f32[8, 4]" replicated
  t2 = wait(ft1)  # t2: "cpu f32[8, 4]" replicated
  t3 = reshape(t2, shape=[4, 8])  # t3: "cpu f32[4, 8]"
  t4 = slice(t3, starts=[0, 0], ends=[4, 5], strides=[1, 1])  # t4: "cpu f32[4, 5]"
  t5 = permute(t4, dims=[1, 0])  # t5: "cpu f32[5, 4]"
  t6 = matmul(t0, t5)  # t6: "cpu f32[3, 4]"
  return t6
)");
    const Trace exec = execution_trace(t, Target::cpu, FusionMode::automatic);
    INFO(print_trace(exec));
    REQUIRE_NOTHROW(verify(exec));
    // t0 stays before the wait; t5, after it, folds.
    REQUIRE(count_op(exec, OpId::Fusion) == 1);
    CHECK(count_op(exec, OpId::Permute) == 1);
    CHECK(exec.bsyms[0].op == OpId::Permute);
    for (const BoundSymbol& b : exec.bsyms)
      if (b.op == OpId::Fusion) {
        const std::optional<TransposedMatmul> tm = transposed_matmul(b);
        REQUIRE(tm);
        CHECK((!tm->a_transposed && tm->b_transposed));
      }
  }
}

// The profiler's matmul track, its step breakdown and advise's step
// simulator price a statement by matmul_flops: a folded region must count
// as the matmul it holds, not as memory-bound work.
TEST_CASE("fold_transposes: a folded region counts the FLOPs of its matmul", "[fusion]") {
  const Shape a = {2, 6, 5}, b = {5, 4};
  const Trace plain = execution_trace(matmul_trace(a, b, false, false), Target::cpu, FusionMode::none);
  const Trace folded = execution_trace(matmul_trace(a, b, true, false), Target::cpu, FusionMode::automatic);
  REQUIRE(count_op(folded, OpId::Fusion) == 1);
  const BoundSymbol& region = folded.bsyms[0];
  REQUIRE(transposed_matmul(region));
  InputTypes in;
  for (const Operand& x : region.inputs) in.push_back(&folded.args[x.name == folded.args[0].name ? 0 : 1].type);
  const BoundSymbol& mm = plain.bsyms[0];
  const double want = matmul_flops(mm, {&plain.args[0].type, &plain.args[1].type});
  CHECK(want == 2.0 * 2 * 6 * 4 * 5);
  CHECK(matmul_flops(region, in) == want);
}
