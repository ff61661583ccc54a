// scatter_into: an index_add onto zeros whose only use is an add to another
// value scatters into that value; anything else is left. Then what it is
// for: gpt2's tied embedding, whose lookup gradient now lands in the head's
// gradient, and the memory plan's peak under block remat that this lowers.
#include <catch2/catch.hpp>

#include <algorithm>

#include "frontend/models/registry.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"
#include "passes/scatter_into.h"
#include "test/cpu_check.h"

using namespace fsdpc;
using namespace fsdpc::test;

TEST_CASE("scatter_into: a scatter-add onto zeros that is added to a value scatters into it", "[scatter_into]") {
  const Trace t = parse_trace(R"(def f(a, i, x, b, j, y):
  # a: "cpu f32[6, 3]"
  # i: "cpu i64[4]"
  # x: "cpu f32[4, 3]"
  # b: "cpu f32[5, 2]"
  # j: "cpu i64[3]"
  # y: "cpu bf16[3, 2]"
  t0 = full(shape=[6, 3], value=0.0, dtype=f32, device=cpu)  # t0: "cpu f32[6, 3]"
  t1 = index_add(t0, i, x, dim=0)  # t1: "cpu f32[6, 3]"
  t2 = add(a, t1)  # t2: "cpu f32[6, 3]"
  t3 = full(shape=[5, 2], value=0.0, dtype=bf16, device=cpu)  # t3: "cpu bf16[5, 2]"
  t4 = convert_element_type(t3, dtype=f32)  # t4: "cpu f32[5, 2]"
  t5 = convert_element_type(y, dtype=f32)  # t5: "cpu f32[3, 2]"
  t6 = index_add(t4, j, t5, dim=0)  # t6: "cpu f32[5, 2]"
  t7 = add(t6, b)  # t7: "cpu f32[5, 2]"
  return t2, t7
)",
                              "f.trace");
  const Trace s = scatter_into(t);
  REQUIRE_NOTHROW(verify(s));
  // The zeros (and the full a cast widened) go; each add's name and place stay.
  CHECK(print_trace(s) == R"(# Constructed by scatter_into
def f(a, i, x, b, j, y):
  # a: "cpu f32[6, 3]"
  # i: "cpu i64[4]"
  # x: "cpu f32[4, 3]"
  # b: "cpu f32[5, 2]"
  # j: "cpu i64[3]"
  # y: "cpu bf16[3, 2]"
  t2 = index_add(a, i, x, dim=0)  # t2: "cpu f32[6, 3]"
  t5 = convert_element_type(y, dtype=f32)  # t5: "cpu f32[3, 2]"
  t7 = index_add(b, j, t5, dim=0)  # t7: "cpu f32[5, 2]"
  return t2, t7
)");
  // The same sums: the reference executor on both.
  Rng r;
  std::vector<Value> args;
  for (const Proxy& a : t.args) {
    Data d = r.values(DType::f32, numel(a.type.shape), 1.0);
    if (a.type.dtype == DType::i64)
      for (double& v : d) v = static_cast<double>(r.uniform_int(0, a.name == "i" ? 5 : 4));
    args.push_back(reference::make_value(a.type, d));
  }
  const std::vector<Value> want = reference::run(t, args), got = reference::run(s, args);
  for (size_t k = 0; k < want.size(); ++k) check_close(got[k], want[k], 1e-12);
}

TEST_CASE("scatter_into: zeros or a scatter used elsewhere, nonzero fill, or another shape are left", "[scatter_into]") {
  const Trace t = parse_trace(R"(def f(a, i, x, c):
  # a: "cpu f32[6, 3]"
  # i: "cpu i64[4]"
  # x: "cpu f32[4, 3]"
  # c: "cpu f32[3]"
  t0 = full(shape=[6, 3], value=0.0, dtype=f32, device=cpu)  # t0: "cpu f32[6, 3]"
  t1 = index_add(t0, i, x, dim=0)  # t1: "cpu f32[6, 3]"
  t2 = add(a, t1)  # t2: "cpu f32[6, 3]"
  t3 = full(shape=[6, 3], value=1.0, dtype=f32, device=cpu)  # t3: "cpu f32[6, 3]"
  t4 = index_add(t3, i, x, dim=0)  # t4: "cpu f32[6, 3]"
  t5 = add(a, t4)  # t5: "cpu f32[6, 3]"
  t6 = full(shape=[6, 3], value=0.0, dtype=f32, device=cpu)  # t6: "cpu f32[6, 3]"
  t7 = index_add(t6, i, x, dim=0)  # t7: "cpu f32[6, 3]"
  t8 = add(a, t7)  # t8: "cpu f32[6, 3]"
  t9 = full(shape=[6, 3], value=0.0, dtype=f32, device=cpu)  # t9: "cpu f32[6, 3]"
  t10 = index_add(t9, i, x, dim=0)  # t10: "cpu f32[6, 3]"
  t11 = broadcast_in_dim(c, shape=[6, 3], broadcast_dims=[1])  # t11: "cpu f32[6, 3]"
  t12 = add(t10, t11)  # t12: "cpu f32[6, 3]"
  t13 = add(t12, t10)  # t13: "cpu f32[6, 3]"
  return t1, t5, t8, t6, t13
)",
                              "f.trace");
  // t1 is returned, t3 is ones, t6 is returned, t10 is read twice.
  CHECK(scatter_into(t) == t);
}

TEST_CASE("scatter_into: gpt2's tied embedding scatters into its head's gradient: no zero [V, C] buffer "
          "in the backward", "[scatter_into]") {
  CaptureOptions co;
  co.batch = 2;
  co.seq = 16;
  PipelineOptions o;
  o.mesh = flat_mesh(2);
  o.remat.mode = RematMode::block;
  const std::vector<Stage> stages = compile(capture(*make_model("gpt2-tiny"), co), o);
  auto stage = [&](const char* name) -> const Trace& {
    const auto s = std::find_if(stages.begin(), stages.end(), [&](const Stage& x) { return x.name == name; });
    REQUIRE(s != stages.end());
    return s->traces.back();  // the joint trace, or the backward
  };
  // wte is [256, 64]: grad's scatter writes into zeros of that shape, once.
  auto zero_tables = [](const Trace& t) {
    int n = 0;
    for (const BoundSymbol& b : t.bsyms)
      n += b.op == OpId::Full && b.output().type.shape == Shape{256, 64} && b.attrs.get_double("value") == 0.0;
    return n;
  };
  CHECK(zero_tables(stage("grad")) == 1);
  CHECK(zero_tables(stage("scatter_into")) == 0);
  CHECK(zero_tables(stage("del")) == 0);
  int into = 0;
  for (const BoundSymbol& b : stage("scatter_into").bsyms)
    into += b.op == OpId::IndexAdd && b.output().type.shape == Shape{256, 64};
  CHECK(into == 1);
}
