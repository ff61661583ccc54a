// autocast (passes/autocast.h) on the tutorial mlp and gpt2-tiny: where the
// casts go and which precision each op reads. That the casts leave the math
// unchanged, gradients included, is checked on the reference executor by
// sharding_parity_test's bf16 cases.
#include <catch2/catch.hpp>

#include <unordered_map>

#include "frontend/models/registry.h"
#include "ir/error.h"
#include "passes/autocast.h"
#include "passes/pipeline.h"

using namespace fsdpc;
using Catch::Contains;

namespace {

const Trace& stage(const std::vector<Stage>& stages, const std::string& name, size_t i = 0) {
  for (const Stage& s : stages)
    if (s.name == name) return s.traces.at(i);
  FAIL("no stage " << name);
  throw 0;
}

std::vector<Stage> compiled(const std::string& model, Strategy strategy, int world,
                            DType reduce_dtype = DType::f32) {
  auto m = make_model(model);
  CaptureOptions co;
  if (model != "mlp") co.seq = 16;
  PipelineOptions o;
  o.strategy = strategy;
  o.mesh = flat_mesh(world);
  o.precision = DType::bf16;
  o.reduce_dtype = reduce_dtype;
  return compile(capture(*m, co), o);
}

}  // namespace

TEST_CASE("autocast casts sharded parameters before they are gathered", "[autocast]") {
  for (const std::string model : {"mlp", "gpt2-tiny"}) {
    INFO(model);
    const std::vector<Stage> stages = compiled(model, Strategy::zero3, 2);
    const Trace& t = stage(stages, "autocast");
    std::unordered_map<std::string, const BoundSymbol*> def;
    for (const BoundSymbol& b : t.bsyms)
      for (const Proxy& p : b.outputs) def[p.name] = &b;
    int syncs = 0;
    for (const BoundSymbol& b : t.bsyms) {
      if (b.op != OpId::Synchronize) continue;
      ++syncs;
      const BoundSymbol* cast = def.at(b.inputs[0].name);
      REQUIRE(cast->op == OpId::ConvertElementType);
      CHECK(cast->attrs.get_str("dtype") == "bf16");
      CHECK(cast->outputs[0].type.dist == DistType::fully_sharded);
      bool of_param = false;
      for (const Proxy& a : t.args) of_param |= a.name == cast->inputs[0].name && a.is_param();
      CHECK(of_param);
      CHECK(b.outputs[0].type.dtype == DType::bf16);
    }
    CHECK(syncs > 0);
  }
}

TEST_CASE("autocast runs matmuls in bf16 and everything else in f32", "[autocast]") {
  const std::vector<Stage> zero2 = compiled("gpt2-tiny", Strategy::zero2, 2);
  const Trace& t = stage(zero2, "autocast");
  int low = 0, f32 = 0;
  for (const BoundSymbol& b : t.bsyms) {
    const bool is_low = b.op == OpId::Linear || b.op == OpId::Matmul || b.op == OpId::ScaledDotProductAttention;
    const bool is_f32 = b.op == OpId::LayerNorm || b.op == OpId::Softmax || b.op == OpId::CrossEntropy ||
                        b.op == OpId::Gelu || b.op == OpId::Add || b.op == OpId::Sum;
    if (!is_low && !is_f32) continue;
    for (const Proxy& p : b.outputs) {
      INFO(op_name(b.op) << " -> " << p.name);
      if (!is_float(p.type.dtype)) continue;
      CHECK(p.type.dtype == (is_low ? DType::bf16 : DType::f32));
    }
    (is_low ? low : f32) += 1;
  }
  CHECK(low > 0);
  CHECK(f32 > 0);
  // The loss comes back in f32, and gradients of f32 parameters are f32.
  std::vector<std::string> names;
  t.returns.collect_names(names);
  std::unordered_map<std::string, DType> dtype;
  for (const BoundSymbol& b : t.bsyms)
    for (const Proxy& p : b.outputs) dtype[p.name] = p.type.dtype;
  CHECK(dtype.at(names.at(0)) == DType::f32);
  const std::vector<Stage> stages = compiled("gpt2-tiny", Strategy::zero3, 2);
  const Trace& bwd = stages.back().traces.at(1);
  std::vector<std::string> grads;
  bwd.returns.collect_names(grads);
  std::unordered_map<std::string, TensorType> types;
  for (const Proxy& a : bwd.args) types[a.name] = a.type;
  for (const BoundSymbol& b : bwd.bsyms)
    for (const Proxy& p : b.outputs) types[p.name] = p.type;
  for (const std::string& g : grads) {
    INFO("gradient " << g);
    CHECK(types.at(g).dtype == DType::f32);
    CHECK(types.at(g).dist == DistType::fully_sharded);
  }
}

TEST_CASE("a bf16 run gathers bf16 and reduces gradients in --reduce-dtype (f32 by default)", "[autocast]") {
  for (DType reduce : {DType::f32, DType::bf16}) {
    INFO("reduce_dtype " << dtype_name(reduce));
    const std::vector<Stage> stages = compiled("mlp", Strategy::zero3, 2, reduce);
    for (const BoundSymbol& b : stage(stages, "autocast").bsyms)
      if (b.op == OpId::Synchronize) CHECK(b.attrs.get_str("reduce_dtype") == dtype_name(reduce));
    int gathers = 0, reduces = 0;
    for (const Trace& t : stages.back().traces)
      for (const BoundSymbol& b : t.bsyms) {
        if (b.op != OpId::AllGather && b.op != OpId::ReduceScatter) continue;
        CHECK(b.outputs[0].type.dtype == (b.op == OpId::AllGather ? DType::bf16 : reduce));
        (b.op == OpId::AllGather ? gathers : reduces) += 1;
      }
    CHECK(gathers >= 2);
    CHECK(reduces == 2);
  }
}

TEST_CASE("under bf16, no_sync and accumulation keep each parameter's gradient in f32", "[autocast]") {
  // The synchronized value is a cast of the parameter; its gradient belongs
  // to the parameter (else no_sync's micro-batches would give it none).
  auto m = make_model("mlp");
  PipelineOptions o;
  o.mesh = flat_mesh(2);
  o.precision = DType::bf16;
  for (bool sync : {false, true}) {
    o.sync_grads = sync;
    o.accumulate_grads = sync;
    const Trace joint = compile_joint(capture(*m), o, nullptr).trace;
    const ReturnTree& grads = joint.returns.items.back();
    std::unordered_map<std::string, const BoundSymbol*> def;
    for (const BoundSymbol& b : joint.bsyms)
      for (const Proxy& p : b.outputs) def[p.name] = &b;
    for (const ReturnTree& g : grads.items) {
      INFO((sync ? "accumulate" : "no_sync") << ": gradient " << g.name);
      REQUIRE(def.count(g.name));
      CHECK(def.at(g.name)->op != OpId::Full);  // not the zero of an unused parameter
      CHECK(def.at(g.name)->outputs[0].type.dtype == DType::f32);
    }
    for (const Proxy& a : joint.args)
      if (a.name.rfind("acc_", 0) == 0) CHECK(a.type.dtype == DType::f32);
    if (sync) CHECK(std::count_if(joint.args.begin(), joint.args.end(),
                                  [](const Proxy& a) { return a.name.rfind("acc_", 0) == 0; }) ==
                    static_cast<std::ptrdiff_t>(grads.items.size()));
  }
}

TEST_CASE("autocast refuses what it cannot do", "[autocast]") {
  auto m = make_model("mlp");
  CHECK_THROWS_WITH(autocast(capture(*m), DType::f32), Contains("bf16 or f16"));
}
