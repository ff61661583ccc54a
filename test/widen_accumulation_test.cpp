// widen_accumulation: a bf16 matmul, sum or index_add whose only use is a
// cast to f32 accumulates into f32; any other use keeps the narrow result.
// Then what it buys: N ranks' bf16 weight gradients equal one process's to
// f32's summation order, where rounded per rank they were 2^-9 apart.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <tuple>

#include "frontend/models/registry.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"
#include "passes/widen_accumulation.h"
#include "test/cpu_check.h"

using namespace fsdpc;
using namespace fsdpc::test;

TEST_CASE("widen: a product, a sum and a scatter-add cast to f32 accumulate into f32", "[widen]") {
  const Trace t = parse_trace(R"(def f(a, b, i):
  # a: "cpu bf16[4, 3]"
  # b: "cpu bf16[3, 5]"
  # i: "cpu i64[4]"
  t0 = matmul(a, b)  # t0: "cpu bf16[4, 5]"
  t1 = convert_element_type(t0, dtype=f32)  # t1: "cpu f32[4, 5]"
  t2 = sum(a, dims=[0])  # t2: "cpu bf16[3]"
  t3 = convert_element_type(t2, dtype=f32)  # t3: "cpu f32[3]"
  t4 = full(shape=[6, 3], value=0.0, dtype=bf16, device=cpu)  # t4: "cpu bf16[6, 3]"
  t5 = index_add(t4, i, a, dim=0)  # t5: "cpu bf16[6, 3]"
  t6 = convert_element_type(t5, dtype=f32)  # t6: "cpu f32[6, 3]"
  return t1, t3, t6
)",
                              "f.trace");
  const Trace w = widen_accumulation(t);
  REQUIRE_NOTHROW(verify(w));
  CHECK(print_trace(w) == R"(# Constructed by widen
def f(a, b, i):
  # a: "cpu bf16[4, 3]"
  # b: "cpu bf16[3, 5]"
  # i: "cpu i64[4]"
  t1 = matmul(a, b, out_dtype=f32)  # t1: "cpu f32[4, 5]"
  t7 = convert_element_type(a, dtype=f32)  # t7: "cpu f32[4, 3]"
  t3 = sum(t7, dims=[0])  # t3: "cpu f32[3]"
  t4 = full(shape=[6, 3], value=0.0, dtype=bf16, device=cpu)  # t4: "cpu bf16[6, 3]"
  t8 = convert_element_type(t4, dtype=f32)  # t8: "cpu f32[6, 3]"
  t9 = convert_element_type(a, dtype=f32)  # t9: "cpu f32[4, 3]"
  t6 = index_add(t8, i, t9, dim=0)  # t6: "cpu f32[6, 3]"
  return t1, t3, t6
)");
}

TEST_CASE("widen: a narrow result used elsewhere, returned or cast to bf16 stays narrow", "[widen]") {
  const Trace t = parse_trace(R"(def f(a, b):
  # a: "cpu bf16[4, 3]"
  # b: "cpu bf16[3, 5]"
  t0 = matmul(a, b)  # t0: "cpu bf16[4, 5]"
  t1 = convert_element_type(t0, dtype=f32)  # t1: "cpu f32[4, 5]"
  t2 = exp(t0)  # t2: "cpu bf16[4, 5]"
  t3 = sum(a, dims=[1])  # t3: "cpu bf16[4]"
  t4 = convert_element_type(t3, dtype=f32)  # t4: "cpu f32[4]"
  t5 = matmul(a, b)  # t5: "cpu bf16[4, 5]"
  t6 = convert_element_type(t5, dtype=f64)  # t6: "cpu f64[4, 5]"
  t7 = exp(a)  # t7: "cpu bf16[4, 3]"
  t8 = convert_element_type(t7, dtype=f32)  # t8: "cpu f32[4, 3]"
  return t1, t2, t3, t4, t6, t8
)",
                              "f.trace");
  // t0 feeds exp too, t3 is returned, t5 widens to f64 (no f32 accumulator
  // holds that), and exp does not accumulate.
  const Trace w = widen_accumulation(t);
  CHECK(w == t);
}

TEST_CASE("widen: a gradient's round trip through bf16 goes; the forward's stays", "[widen]") {
  const Trace t = parse_trace(R"(def f(x, cotangent):
  # x: "cpu f32[4]"
  # cotangent: "cpu f32[]"
  t0 = convert_element_type(x, dtype=bf16)  # t0: "cpu bf16[4]"
  t1 = convert_element_type(t0, dtype=f32)  # t1: "cpu f32[4]"
  t2 = broadcast_in_dim(cotangent, shape=[4], broadcast_dims=[])  # t2: "cpu f32[4]"
  t3 = convert_element_type(t2, dtype=bf16)  # t3: "cpu bf16[4]"
  t4 = convert_element_type(t3, dtype=f32)  # t4: "cpu f32[4]"
  t5 = mul(t4, t1)  # t5: "cpu f32[4]"
  t6 = convert_element_type(t2, dtype=bf16)  # t6: "cpu bf16[4]"
  t7 = convert_element_type(t6, dtype=f32)  # t7: "cpu f32[4]"
  return t5, t6, t7
)",
                              "f.trace");
  // t0's round trip is the forward's (x is not computed from the
  // cotangent); t6 is returned as well as widened.
  const Trace w = widen_accumulation(t);
  REQUIRE_NOTHROW(verify(w));
  CHECK(print_trace(w) == R"(# Constructed by widen
def f(x, cotangent):
  # x: "cpu f32[4]"
  # cotangent: "cpu f32[]"
  t0 = convert_element_type(x, dtype=bf16)  # t0: "cpu bf16[4]"
  t1 = convert_element_type(t0, dtype=f32)  # t1: "cpu f32[4]"
  t2 = broadcast_in_dim(cotangent, shape=[4], broadcast_dims=[])  # t2: "cpu f32[4]"
  t5 = mul(t2, t1)  # t5: "cpu f32[4]"
  t6 = convert_element_type(t2, dtype=bf16)  # t6: "cpu bf16[4]"
  t7 = convert_element_type(t6, dtype=f32)  # t7: "cpu f32[4]"
  return t5, t6, t7
)");
}

TEST_CASE("widen: a bf16 matmul into f32 equals the float64 product of its operands to f32's precision",
          "[widen][cpu][bf16]") {
  Rng r;
  for (const auto& [m, k, n] : {std::tuple{5, 300, 7}, std::tuple{64, 96, 130}, std::tuple{3, 1, 2}}) {
    Arg a = r.tensor({m, k}), b = r.tensor({k, n});
    for (Arg* x : {&a, &b}) {
      x->type.dtype = DType::bf16;
      for (double& v : x->data) v = round_to_bf16(static_cast<float>(v));
    }
    Attrs wide;
    wide.set("out_dtype", std::string("f32"));
    const OneOp o = one_op(OpId::Matmul, {a, b}, wide);
    REQUIRE(o.trace.bsyms.back().output().type.dtype == DType::f32);
    REQUIRE(cpu_executor().claims(o.trace.bsyms.back()));
    const Value got = CpuRunner().run(o.trace, o.values).at(0);
    double worst = 0, worst_rounded = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double exact = 0, scale = 0;
        for (int64_t p = 0; p < k; ++p) {
          exact += a.data[i * k + p] * b.data[p * n + j];
          scale += std::abs(a.data[i * k + p] * b.data[p * n + j]);
        }
        if (scale == 0) continue;
        const double g = got.data[i * n + j];
        worst = std::max(worst, std::abs(g - exact) / scale);
        worst_rounded = std::max(worst_rounded, std::abs(round_to_bf16(static_cast<float>(exact)) - exact) / scale);
      }
    INFO(m << "x" << k << "x" << n << ": error " << worst << " of the magnitudes' sum; rounded to bf16 " << worst_rounded);
    CHECK(worst < 1e-6);  // f32 accumulation: ~k·2^-24 at most, far below bf16's 2^-9
  }
}

namespace {

// How many of each summing op's narrow results are only cast to f32.
std::map<OpId, int> rounded_then_widened(const Trace& t) {
  std::map<std::string, int> uses;
  for_each_bsym(t.bsyms, [&](const BoundSymbol& b) {
    for (const Operand& in : b.inputs)
      if (!in.is_scalar()) ++uses[in.name];
  });
  std::map<std::string, OpId> narrow;
  std::map<OpId, int> n;
  for (const BoundSymbol& b : t.bsyms) {
    const bool sums = b.op == OpId::Matmul || b.op == OpId::Sum || b.op == OpId::IndexAdd || b.op == OpId::Add;
    if (sums && b.outputs.size() == 1 && b.output().type.dtype == DType::bf16) narrow[b.output().name] = b.op;
    if (b.op == OpId::LinearCrossEntropyGrad && b.outputs[1].type.dtype == DType::bf16)  // the fused head's dw
      narrow[b.outputs[1].name] = b.op;
    if (b.op == OpId::ConvertElementType && b.output().type.dtype == DType::f32 && !b.inputs[0].is_scalar())
      if (auto p = narrow.find(b.inputs[0].name); p != narrow.end() && uses[p->first] == 1) ++n[p->second];
  }
  return n;
}

}  // namespace

TEST_CASE("widen: in gpt2-tiny's bf16 joint trace no gradient is rounded to bf16 on its way to f32", "[widen]") {
  PipelineOptions o;
  o.mesh = flat_mesh(2);
  o.precision = DType::bf16;
  const std::vector<Stage> stages = compile(capture(*make_model("gpt2-tiny")), o);
  auto stage = [&](const char* name) -> const Trace& {
    const auto s = std::find_if(stages.begin(), stages.end(), [&](const Stage& x) { return x.name == name; });
    REQUIRE(s != stages.end());
    return s->traces.at(0);
  };
  const Trace &grad = stage("grad"), &widened = stage("widen");
  std::map<OpId, int> before = rounded_then_widened(grad);
  // Each block's weights (qkv, attention out, fc, proj); the biases' sums;
  // wpe's scatter-add; wte's lookup and head gradients added (their add).
  // The fused head's dw and wte's scatter-add feed that add, and wpe's sum
  // over the batch feeds its scatter-add: later rounds' patterns.
  const int blocks = 2;
  CHECK(before[OpId::Matmul] >= 4 * blocks);
  CHECK(before[OpId::Sum] >= 4 * blocks);
  CHECK(before[OpId::IndexAdd] == 1);
  CHECK(before[OpId::Add] == 1);
  CHECK(rounded_then_widened(widened).empty());
  auto wide_products = [](const Trace& t) {
    int n = 0;
    for (const BoundSymbol& b : t.bsyms) n += b.op == OpId::Matmul && b.attrs.has("out_dtype");
    return n;  // attention's backward writes its scores in f32 already
  };
  CHECK(wide_products(widened) - wide_products(grad) == before[OpId::Matmul]);
  int head_dw_f32 = 0;  // the fused head's weight gradient, via the add
  for (const BoundSymbol& b : widened.bsyms)
    head_dw_f32 += b.op == OpId::LinearCrossEntropyGrad && b.outputs[1].type.dtype == DType::f32;
  CHECK(head_dw_f32 == 1);
  REQUIRE_NOTHROW(verify(widened));
  CHECK(widen_accumulation(widened) == widened);  // its fixed point
}
