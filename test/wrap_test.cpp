// FSDP units (wrap_units) and the bucketing pass, on the built-in models
// compiled through the pipeline: one collective per unit, names the rest of
// the trace reads kept, padding, hybrid, frozen parameters and DDP buckets.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "frontend/models/registry.h"
#include "ir/error.h"
#include "ir/verifier.h"
#include "passes/bucketing.h"
#include "passes/pipeline.h"
#include "passes/wrap.h"

using namespace fsdpc;
using Catch::Contains;

namespace {

Trace captured(const std::string& model) { return capture(*make_model(model)); }

std::vector<std::string> param_names(const Trace& t) {
  std::vector<std::string> out;
  for (const Proxy& a : t.args)
    if (a.is_param()) out.push_back(a.name);
  return out;
}

int count_ops(const Trace& t, OpId op) {
  int n = 0;
  for (const BoundSymbol& b : t.bsyms) n += b.op == op;
  return n;
}

std::vector<const BoundSymbol*> ops(const Trace& t, OpId op) {
  std::vector<const BoundSymbol*> out;
  for (const BoundSymbol& b : t.bsyms)
    if (b.op == op) out.push_back(&b);
  return out;
}

PipelineOptions options(Strategy s, int world, bool bucketing = true) {
  PipelineOptions o;
  o.strategy = s;
  o.mesh = flat_mesh(world);
  o.bucketing = bucketing;
  return o;
}

PipelineOptions hybrid_options(Strategy s, int replicas, int shards) {
  PipelineOptions o = options(s, 1);
  o.mesh = Mesh{replicas, shards};
  return o;
}

const Stage& stage(const std::vector<Stage>& stages, const std::string& name) {
  for (const Stage& s : stages)
    if (s.name == name) return s;
  FAIL("no stage " << name);
  return stages.front();
}

// Every stage verifies; the bucketing stage takes and returns what the stage
// before it did (argument types may follow the forward's saved values:
// a gathered parameter cut from a flat buffer is no longer `replicated`).
void check_stages(const std::vector<Stage>& stages) {
  for (const Stage& s : stages)
    for (const Trace& t : s.traces) REQUIRE_NOTHROW(verify(t));
  const Stage& before = stage(stages, "cse");
  const Stage& bucketed = stage(stages, "bucketing");
  REQUIRE(bucketed.traces.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(bucketed.traces[i].provenance == "bucketing");
    CHECK(bucketed.traces[i].returns == before.traces[i].returns);
    REQUIRE(bucketed.traces[i].args.size() == before.traces[i].args.size());
    for (size_t a = 0; a < before.traces[i].args.size(); ++a) {
      CHECK(bucketed.traces[i].args[a].name == before.traces[i].args[a].name);
      CHECK(bucketed.traces[i].args[a].type.shape == before.traces[i].args[a].type.shape);
    }
  }
}

Proxy param(const std::string& path, Shape shape) {
  Proxy p;
  p.name = param_proxy_name(path);
  p.param_path = path;
  p.type.shape = std::move(shape);
  return p;
}

}  // namespace

TEST_CASE("wrap: block units of gpt2-tiny are root, h.0 and h.1", "[wrap]") {
  const Trace t = captured("gpt2-tiny");
  const std::vector<Unit> units = wrap_units(t, "block");
  REQUIRE(units.size() == 3);
  CHECK(units[0].name == "root");
  CHECK(units[0].params ==
        std::vector<std::string>{"t_wte_weight", "t_wpe_weight", "t_ln_f_weight", "t_ln_f_bias"});
  CHECK(units[1].name == "h.0");
  CHECK(units[2].name == "h.1");
  REQUIRE(units[1].params.size() == 12);
  CHECK(units[1].params.front() == "t_h_0_ln_1_weight");
  CHECK(units[1].params.back() == "t_h_0_mlp_c_proj_bias");
  for (const std::string& p : units[2].params) CHECK(p.rfind("t_h_1_", 0) == 0);
}

TEST_CASE("wrap: the tutorial mlp is one root unit (its numeric paths have no prefix)", "[wrap]") {
  const std::vector<Unit> units = wrap_units(captured("mlp"), "block");
  REQUIRE(units.size() == 1);
  CHECK(units[0].name == "root");
  CHECK(units[0].params == std::vector<std::string>{"t_0_weight", "t_2_weight"});
}

TEST_CASE("wrap: block is generic: the first numbered component after a prefix", "[wrap]") {
  Trace t;
  t.args = {param("encoder.layers.0.attn.w", {4}), param("encoder.layers.1.w", {4}), param("head.w", {4}),
            param("encoder.layers.0.mlp.3.w", {4})};
  Proxy x;
  x.name = "x";
  t.args.insert(t.args.begin(), x);
  const std::vector<Unit> units = wrap_units(t, "block");
  REQUIRE(units.size() == 3);
  CHECK(units[0].name == "root");
  CHECK(units[0].params == std::vector<std::string>{"t_head_w"});
  CHECK(units[1].name == "encoder.layers.0");
  CHECK(units[1].params == std::vector<std::string>{"t_encoder_layers_0_attn_w", "t_encoder_layers_0_mlp_3_w"});
  CHECK(units[2].name == "encoder.layers.1");
}

TEST_CASE("wrap: size:N groups consecutive parameters until N elements", "[wrap]") {
  const Trace t = captured("gpt2-tiny");
  const std::vector<std::string> all = param_names(t);
  for (int64_t n : {1, 5000, 20000, 100000, 100000000}) {
    const std::vector<Unit> units = wrap_units(t, "size:" + std::to_string(n));
    std::vector<std::string> flat;
    for (size_t u = 0; u < units.size(); ++u) {
      int64_t held = 0, before_last = 0;
      for (const std::string& p : units[u].params) {
        before_last = held;
        for (const Proxy& a : t.args)
          if (a.name == p) held += numel(a.type.shape);
        flat.push_back(p);
      }
      if (u + 1 < units.size()) {
        CHECK(held >= n);         // full ...
        CHECK(before_last < n);   // ... and not one parameter too many
      }
    }
    CHECK(flat == all);
  }
  CHECK(wrap_units(t, "size:100000000").size() == 1);
  CHECK(wrap_units(t, "size:1").size() == all.size());
  // wte (16384) + wpe (4096) reach 20000; the rest follows in order.
  const std::vector<Unit> units = wrap_units(t, "size:20000");
  CHECK(units[0].params == std::vector<std::string>{"t_wte_weight", "t_wpe_weight"});
}

TEST_CASE("wrap: size:N counts unsharded elements on a sharded trace", "[wrap]") {
  // mlp at world 3: each shard is [22, 64] (1408), the full weight 4096.
  PipelineOptions o = options(Strategy::zero3, 3, false);
  const std::vector<Stage> stages = compile(captured("mlp"), o);
  const Trace& sharded = stage(stages, "fsdp").traces[0];
  CHECK(wrap_units(sharded, "size:4096").size() == 2);
  CHECK(wrap_units(sharded, "size:4097").size() == 1);
}

TEST_CASE("wrap: none is one unit with every parameter", "[wrap]") {
  const Trace t = captured("gpt2-tiny");
  const std::vector<Unit> units = wrap_units(t, "none");
  REQUIRE(units.size() == 1);
  CHECK(units[0].name == "root");
  CHECK(units[0].params == param_names(t));
}

TEST_CASE("wrap: a malformed policy is a user error naming it and the accepted forms", "[wrap]") {
  const Trace t = captured("mlp");
  for (const char* bad : {"blocks", "", "size:", "size:0", "size:-3", "size:abc", "size:12x", "size"}) {
    CHECK_THROWS_AS(wrap_units(t, bad), Error);
    CHECK_THROWS_WITH(wrap_units(t, bad), Contains(std::string("'") + bad + "'") && Contains("size:N") &&
                                              Contains("block") && Contains("none"));
  }
  PipelineOptions o = options(Strategy::zero3, 2);
  o.wrap = "layer";
  CHECK_THROWS_AS(compile(t, o), Error);
}

TEST_CASE("bucketing: gpt2-tiny zero3 gathers and reduces once per unit", "[bucketing]") {
  const std::vector<Stage> stages = compile(captured("gpt2-tiny"), options(Strategy::zero3, 2));
  check_stages(stages);
  const Trace& split_fwd = stage(stages, "split").traces[0];
  const Trace& split_bwd = stage(stages, "split").traces[1];
  const Trace& fwd = stage(stages, "bucketing").traces[0];
  const Trace& bwd = stage(stages, "bucketing").traces[1];
  CHECK(count_ops(split_fwd, OpId::AllGather) == 28);
  CHECK(count_ops(split_bwd, OpId::ReduceScatter) == 28);
  CHECK(count_ops(fwd, OpId::AllGather) == 3);
  CHECK(count_ops(fwd, OpId::Pack) == 3);
  CHECK(count_ops(fwd, OpId::Wait) == 3);
  CHECK(count_ops(bwd, OpId::ReduceScatter) == 3);
  // zero3 re-gathers in the backward, one bucket per unit it needs again.
  CHECK(count_ops(bwd, OpId::AllGather) == 3);
  CHECK(count_ops(bwd, OpId::Unpack) == 3);
  // Each gradient bucket unpacks into its unit's gradients (12 per block, 4 for root).
  std::vector<size_t> sizes;
  for (const BoundSymbol* u : ops(bwd, OpId::Unpack)) sizes.push_back(u->outputs.size());
  std::sort(sizes.begin(), sizes.end());
  CHECK(sizes == std::vector<size_t>{4, 12, 12});
  // The root unit's gather packs its shards in the unit's order.
  const BoundSymbol* root = ops(fwd, OpId::Pack)[0];
  REQUIRE(root->inputs.size() == 4);
  CHECK(root->inputs[0].name == "t_wte_weight");
  CHECK(root->inputs[1].name == "t_wpe_weight");
}

TEST_CASE("bucketing: zero2 keeps gathered parameters: no all_gather in the backward", "[bucketing]") {
  const std::vector<Stage> stages = compile(captured("gpt2-tiny"), options(Strategy::zero2, 2));
  check_stages(stages);
  CHECK(count_ops(stage(stages, "bucketing").traces[0], OpId::AllGather) == 3);
  CHECK(count_ops(stage(stages, "bucketing").traces[1], OpId::AllGather) == 0);
  CHECK(count_ops(stage(stages, "bucketing").traces[1], OpId::ReduceScatter) == 3);
}

TEST_CASE("bucketing: padded shards (mlp over 3 ranks) are cut out and unpadded", "[bucketing]") {
  const std::vector<Stage> stages = compile(captured("mlp"), options(Strategy::zero3, 3));
  check_stages(stages);
  const Trace& fwd = stage(stages, "bucketing").traces[0];
  const Trace& bwd = stage(stages, "bucketing").traces[1];
  REQUIRE(count_ops(fwd, OpId::AllGather) == 1);
  CHECK(ops(fwd, OpId::Pack)[0]->inputs.size() == 2);
  CHECK(ops(fwd, OpId::AllGather)[0]->output().type.shape == Shape{3 * 2 * 22 * 64});
  REQUIRE(count_ops(bwd, OpId::ReduceScatter) == 1);
  const BoundSymbol* unpack = ops(bwd, OpId::Unpack)[0];
  CHECK(unpack->attrs.get_int_lists("shapes") == IntLists{{22, 64}, {22, 64}});
  // The padded gradients ([66, 64]) become one interleaved [3 * 2816] buffer.
  CHECK(ops(bwd, OpId::ReduceScatter)[0]->output().type.shape == Shape{2816});
  CHECK(count_ops(bwd, OpId::Pad) == 2);
}

TEST_CASE("bucketing: hybrid reduces each unit once in the shard group, once across replicas",
          "[bucketing]") {
  for (Strategy s : {Strategy::hybrid, Strategy::hybrid_zero2}) {
    const std::vector<Stage> stages = compile(captured("gpt2-tiny"), hybrid_options(s, 2, 2));
    check_stages(stages);
    const Trace& bwd = stage(stages, "bucketing").traces[1];
    CHECK(count_ops(stage(stages, "bucketing").traces[0], OpId::AllGather) == 3);
    CHECK(count_ops(bwd, OpId::ReduceScatter) == 3);
    CHECK(count_ops(bwd, OpId::AllReduce) == 3);
    for (const BoundSymbol* ar : ops(bwd, OpId::AllReduce)) CHECK(ar->attrs.get_str("group") == "replicate");
  }
}

TEST_CASE("bucketing: a frozen parameter is gathered with its unit but has no gradient", "[bucketing]") {
  Trace t = captured("gpt2-tiny");
  for (Proxy& a : t.args)
    if (a.name == "t_h_0_ln_1_weight") a.requires_grad = false;
  const std::vector<Stage> stages = compile(t, options(Strategy::zero3, 2));
  check_stages(stages);
  const Trace& fwd = stage(stages, "bucketing").traces[0];
  const Trace& bwd = stage(stages, "bucketing").traces[1];
  std::vector<size_t> packs, unpacks;
  for (const BoundSymbol* p : ops(fwd, OpId::Pack)) packs.push_back(p->inputs.size());
  for (const BoundSymbol* u : ops(bwd, OpId::Unpack)) unpacks.push_back(u->outputs.size());
  std::sort(packs.begin(), packs.end());
  std::sort(unpacks.begin(), unpacks.end());
  CHECK(packs == std::vector<size_t>{4, 12, 12});
  CHECK(unpacks == std::vector<size_t>{4, 11, 12});
}

TEST_CASE("bucketing: other wrap policies give one collective per unit", "[bucketing]") {
  const Trace t = captured("gpt2-tiny");
  PipelineOptions o = options(Strategy::zero3, 2);
  o.wrap = "none";
  std::vector<Stage> stages = compile(t, o);
  check_stages(stages);
  CHECK(count_ops(stage(stages, "bucketing").traces[0], OpId::AllGather) == 1);
  CHECK(count_ops(stage(stages, "bucketing").traces[1], OpId::ReduceScatter) == 1);
  o.wrap = "size:20000";
  stages = compile(t, o);
  check_stages(stages);
  CHECK(count_ops(stage(stages, "bucketing").traces[0], OpId::AllGather) ==
        static_cast<int>(wrap_units(stage(stages, "fsdp").traces[0], o.wrap).size()));
}

TEST_CASE("bucketing: without unit buckets FSDP traces are unchanged", "[bucketing]") {
  for (Strategy s : {Strategy::zero3, Strategy::zero2}) {
    const std::vector<Stage> stages = compile(captured("gpt2-tiny"), options(s, 2, false));
    for (size_t i = 0; i < 2; ++i) {
      Trace before = stage(stages, "cse").traces[i];
      before.provenance = "bucketing";
      CHECK(stage(stages, "bucketing").traces[i] == before);
    }
  }
}

TEST_CASE("bucketing: DDP buckets gradients by size in the order they become ready", "[bucketing]") {
  const Trace t = captured("gpt2-tiny");
  PipelineOptions o = options(Strategy::no_shard, 2, false);
  o.bucket_mb = 1e-6;  // every gradient alone: left as it was
  std::vector<Stage> stages = compile(t, o);
  check_stages(stages);
  CHECK(count_ops(stage(stages, "bucketing").traces[1], OpId::AllReduce) == 28);
  CHECK(count_ops(stage(stages, "bucketing").traces[1], OpId::Pack) == 0);

  o.bucket_mb = 1e6;  // one bucket
  stages = compile(t, o);
  check_stages(stages);
  const Trace& one = stage(stages, "bucketing").traces[1];
  CHECK(count_ops(one, OpId::AllReduce) == 1);
  REQUIRE(count_ops(one, OpId::Pack) == 1);
  CHECK(ops(one, OpId::Pack)[0]->inputs.size() == 28);
  CHECK(ops(one, OpId::Unpack)[0]->outputs.size() == 28);

  o.bucket_mb = 0.1;
  stages = compile(t, o);
  check_stages(stages);
  const Trace& some = stage(stages, "bucketing").traces[1];
  CHECK(count_ops(some, OpId::AllReduce) > 1);
  CHECK(count_ops(some, OpId::AllReduce) < 28);
  // In the order the split backward all_reduces them, each bucket within the cap.
  std::vector<std::string> ready, packed;
  for (const BoundSymbol* ar : ops(stage(stages, "split").traces[1], OpId::AllReduce))
    ready.push_back(ar->inputs[0].name);
  for (const BoundSymbol* ar : ops(some, OpId::AllReduce)) {
    const BoundSymbol* pack = nullptr;
    for (const BoundSymbol* p : ops(some, OpId::Pack))
      if (p->output().name == ar->inputs[0].name) pack = p;
    if (!pack) {
      packed.push_back(ar->inputs[0].name);
      continue;
    }
    CHECK(pack->output().type.shape[0] * 4 <= 0.1 * 1024 * 1024);
    for (const Operand& in : pack->inputs) packed.push_back(in.name);
  }
  CHECK(packed == ready);
  // The forward is untouched.
  Trace split_fwd = stage(stages, "split").traces[0];
  split_fwd.provenance = "bucketing";
  CHECK(stage(stages, "bucketing").traces[0] == split_fwd);
}

TEST_CASE("bucketing: gradient buckets need the parameter of each returned gradient", "[bucketing]") {
  const std::vector<Stage> stages = compile(captured("mlp"), options(Strategy::zero3, 2, false));
  const Trace& bwd = stage(stages, "split").traces[1];
  const Trace& sharded = stage(stages, "fsdp").traces[0];
  BucketingOptions o{Strategy::zero3, wrap_units(sharded, "block"), true, 25.0, false, {}};
  CHECK(count_ops(bucketing(bwd, o), OpId::ReduceScatter) == 2);  // left per parameter
  o.grad_params = gradient_params(sharded);
  const Trace b = bucketing(bwd, o);
  REQUIRE_NOTHROW(verify(b));
  CHECK(count_ops(b, OpId::ReduceScatter) == 1);
}
