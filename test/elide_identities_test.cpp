// elide_identities: collectives over one rank and divisions by one are
// dropped and their results renamed; everything else stays as it was.
// FSDPC_KEEP_COLLECTIVES=1 keeps the collectives, and a world of one then
// trains to the same losses through them.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "frontend/models/registry.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/elide_identities.h"
#include "passes/pipeline.h"
#include "test/run_cli.h"
#include "test/scratch.h"

using namespace fsdpc;

namespace {

// A step on a world of one: a gather, a product, a division by one and a
// reduction; `tail` ends it.
Trace one_rank_step(const std::string& tail) {
  return parse_trace(R"(def f(x, t_w):
  # x: "cpu f32[4, 4]"
  # t_w: "cpu f32[4, 4]" fully_sharded param=w
  ft0 = all_gather(t_w, group=dp, size=1, dim=0)  # ft0: "FUTURE cpu f32[4, 4]" replicated
  t1 = wait(ft0)  # t1: "cpu f32[4, 4]" replicated
  t2 = matmul(x, t1)  # t2: "cpu f32[4, 4]"
  t3 = div(t2, 1.0)  # t3: "cpu f32[4, 4]"
  ft4 = reduce_scatter(t3, group=dp, size=1, dim=0, op=sum)  # ft4: "FUTURE cpu f32[4, 4]" fully_sharded
  t5 = wait(ft4)  # t5: "cpu f32[4, 4]" fully_sharded
)" + tail,
                     "f.trace");
}

int collectives(const Trace& t) {
  int n = 0;
  for (const BoundSymbol& b : t.bsyms) n += op_info(b.op).category == OpCategory::collective;
  return n;
}

}  // namespace

TEST_CASE("a gather, a reduction and a division by one disappear, their users renamed", "[elide]") {
  const Trace t = one_rank_step(R"(  t6 = div(t5, 2.0)  # t6: "cpu f32[4, 4]"
  return t1, t6
)");
  const Trace e = elide_identities(t);
  REQUIRE_NOTHROW(verify(e));
  CHECK(print_trace(e) == R"(# Constructed by elide
def f(x, t_w):
  # x: "cpu f32[4, 4]"
  # t_w: "cpu f32[4, 4]" replicated param=w
  t2 = matmul(x, t_w)  # t2: "cpu f32[4, 4]"
  t6 = div(t2, 2.0)  # t6: "cpu f32[4, 4]"
  return t_w, t6
)");
}

TEST_CASE("collectives over more than one rank and divisions that change the type stay", "[elide]") {
  const Trace t = parse_trace(R"(def f(x, i):
  # x: "cpu f32[4, 4]"
  # i: "cpu i64[4]"
  ft0 = all_reduce(x, group=dp, size=2, op=sum)  # ft0: "FUTURE cpu f32[4, 4]" replicated
  t1 = wait(ft0)  # t1: "cpu f32[4, 4]" replicated
  t2 = div(i, 1.0)  # t2: "cpu f32[4]"
  t3 = div(1.0, t1)  # t3: "cpu f32[4, 4]"
  return t1, t2, t3
)",
                                "f.trace");
  const Trace e = elide_identities(t);
  REQUIRE(e.bsyms.size() == t.bsyms.size());
  for (size_t i = 0; i < t.bsyms.size(); ++i) CHECK(e.bsyms[i] == t.bsyms[i]);
}

TEST_CASE("at world size 1 every strategy compiles to traces without collectives", "[elide]") {
  for (const char* model : {"mlp", "gpt2-tiny"})
    for (Strategy s : {Strategy::zero3, Strategy::zero2, Strategy::no_shard}) {
      PipelineOptions o;
      o.strategy = s;
      o.mesh = flat_mesh(1);
      const std::vector<Stage> stages = compile(capture(*make_model(model)), o);
      INFO(model << " " << strategy_name(s));
      for (const Trace& t : stages.back().traces) {
        CHECK(collectives(t) == 0);
        for (const BoundSymbol& b : t.bsyms)
          if (b.op == OpId::Div && b.inputs.size() == 2 && b.inputs[1].is_scalar()) CHECK(*b.inputs[1].scalar != 1.0);
      }
    }
}

TEST_CASE("at world size 2 the collectives are all still there", "[elide]") {
  PipelineOptions o;
  o.mesh = flat_mesh(2);
  const std::vector<Stage> stages = compile(capture(*make_model("mlp")), o);
  int after = 0;
  for (const Trace& t : stages.back().traces) after += collectives(t);
  // forward: 2 gathers and their waits; backward: 1 regather and 2
  // gradient reductions, and their waits.
  CHECK(after == 4 + 6);
}

TEST_CASE("with collectives off only the division by one goes", "[elide]") {
  const Trace t = one_rank_step("  return t1, t5\n");
  const Trace e = elide_identities(t, {.collectives = false});
  REQUIRE_NOTHROW(verify(e));
  CHECK(print_trace(e) == R"(# Constructed by elide
def f(x, t_w):
  # x: "cpu f32[4, 4]"
  # t_w: "cpu f32[4, 4]" fully_sharded param=w
  ft0 = all_gather(t_w, group=dp, size=1, dim=0)  # ft0: "FUTURE cpu f32[4, 4]" replicated
  t1 = wait(ft0)  # t1: "cpu f32[4, 4]" replicated
  t2 = matmul(x, t1)  # t2: "cpu f32[4, 4]"
  ft4 = reduce_scatter(t2, group=dp, size=1, dim=0, op=sum)  # ft4: "FUTURE cpu f32[4, 4]" fully_sharded
  t5 = wait(ft4)  # t5: "cpu f32[4, 4]" fully_sharded
  return t1, t5
)");
}

namespace {

std::vector<double> train_losses(const std::string& env, const std::string& tag) {
  const std::filesystem::path log = fsdpc::testing::scratch(tag + ".jsonl");
  const std::string args =
      "train --model gpt2-tiny --seq 16 --batch 4 --steps 4 --optimizer adamw --lr 3e-3 --clip 1.0 --seed 5"
      " --log-json '" + log.string() + "'";
  const fsdpc::testing::Run r = fsdpc::testing::run_fsdpc(args, {.env = env, .merge = true});
  INFO(env << " fsdpc " << args << "\n" << r.out);
  REQUIRE(r.code == 0);
  return fsdpc::testing::logged_losses(log.string());
}

}  // namespace

TEST_CASE("keep_collectives (FSDPC_KEEP_COLLECTIVES=1): a world of one keeps its collectives, same losses",
          "[elide][train]") {
  PipelineOptions o;
  o.mesh = flat_mesh(1);
  o.keep_collectives = true;
  auto count = [&] {
    const std::vector<Stage> stages = compile(capture(*make_model("gpt2-tiny")), o);
    int n = 0;
    for (const Trace& t : stages.back().traces) n += collectives(t);
    return n;
  };
  CHECK(count() > 0);
  o.keep_collectives = false;
  CHECK(count() == 0);
  // fsdpc train reads the variable (tools/sharding_options.cpp).
  const std::vector<double> without = train_losses("", "elided");
  const std::vector<double> with = train_losses("FSDPC_KEEP_COLLECTIVES=1", "kept");
  REQUIRE(with.size() == without.size());
  for (size_t i = 0; i < with.size(); ++i) {
    INFO("step " << i);
    CHECK(with[i] == Approx(without[i]).epsilon(1e-6));
  }
}
