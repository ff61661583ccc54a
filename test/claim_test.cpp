// The claim pass with stand-in executors: priority order, composites whole or
// decomposed, unclaimed prims named in the error, and the claimed trace's
// text and JSON forms (cpu_linear, mpi_all_gather) round-trip.
#include <catch2/catch.hpp>

#include "executors/claim.h"
#include "frontend/models/registry.h"
#include "ir/json.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"

using namespace fsdpc;
using Catch::Contains;

namespace {

// Claims the ops in its list, under a given name.
class ListExecutor : public Executor {
 public:
  ListExecutor(std::string_view name, std::vector<OpId> ops) : name_(name), ops_(std::move(ops)) {}
  std::string_view name() const override { return name_; }
  bool claims(const BoundSymbol& b) const override {
    return std::find(ops_.begin(), ops_.end(), b.op) != ops_.end();
  }
  KernelFn kernel(OpId) const override { return nullptr; }

 private:
  std::string_view name_;
  std::vector<OpId> ops_;
};

std::vector<OpId> all_but(std::vector<OpId> excluded) {
  std::vector<OpId> ops;
  for (int i = 0; i < kNumOps; ++i) {
    OpId op = static_cast<OpId>(i);
    if (std::find(excluded.begin(), excluded.end(), op) == excluded.end()) ops.push_back(op);
  }
  return ops;
}

std::vector<OpId> collectives() {
  return {OpId::AllGather, OpId::ReduceScatter, OpId::AllReduce, OpId::Broadcast, OpId::Wait};
}

Trace final_forward(const std::string& model) {
  PipelineOptions o;
  o.mesh = flat_mesh(2);
  return compile(capture(*make_model(model)), o).back().traces.at(0);
}

}  // namespace

TEST_CASE("claimed statements print with their executor's prefix and parse back", "[claim]") {
  std::vector<OpId> not_cpu = collectives();
  not_cpu.push_back(OpId::Synchronize);
  ListExecutor cpu("cpu", all_but(not_cpu)), mpi("mpi", collectives());
  Trace t = claim(final_forward("mlp"), {&cpu, &mpi});
  CHECK(t.provenance == "exec");
  REQUIRE_NOTHROW(verify(t));
  std::string text = print_trace(t);
  CHECK_THAT(text, Contains("= mpi_all_gather(t_0_weight, group=dp, size=2, dim=0)") &&
                       Contains("= mpi_wait(") && Contains("= cpu_linear(") && Contains("= cpu_tanh(") &&
                       Contains("\n  del "));
  Trace parsed = parse_trace(text, "exec");
  CHECK(parsed == t);
  CHECK(print_trace(parsed) == text);
  CHECK(trace_from_json(trace_to_json(t), "exec") == t);
  for (const BoundSymbol& b : t.bsyms) CHECK((b.op == OpId::Del) == b.executor.empty());
}

TEST_CASE("the first executor in priority order wins", "[claim]") {
  ListExecutor first("cuda", {OpId::Tanh}), second("cpu", all_but(collectives()));
  ListExecutor mpi("mpi", collectives());
  Trace t = claim(final_forward("mlp"), {&first, &second, &mpi});
  for (const BoundSymbol& b : t.bsyms)
    if (b.op == OpId::Tanh) CHECK(b.executor == "cuda");
    else if (b.op == OpId::Linear) CHECK(b.executor == "cpu");
}

TEST_CASE("a composite nobody claims whole runs its decomposition", "[claim]") {
  std::vector<OpId> excluded = collectives();
  excluded.push_back(OpId::LayerNorm);
  excluded.push_back(OpId::Gelu);
  ListExecutor cpu("cpu", all_but(excluded)), mpi("mpi", collectives());
  Trace fwd = final_forward("gpt2-tiny");
  Trace t = claim(fwd, {&cpu, &mpi});
  REQUIRE_NOTHROW(verify(t));
  for (const BoundSymbol& b : t.bsyms) {
    CHECK(b.op != OpId::LayerNorm);
    CHECK(b.op != OpId::Gelu);
  }
  CHECK(t.bsyms.size() > fwd.bsyms.size());
  CHECK(t.returns == fwd.returns);
}

TEST_CASE("an unclaimed prim is an error that names the op", "[claim]") {
  ListExecutor cpu("cpu", all_but({OpId::Tanh, OpId::AllGather, OpId::Wait}));
  CHECK_THROWS_WITH(claim(final_forward("mlp"), {&cpu}),
                    Contains("no executor claims all_gather") && Contains("executors: cpu"));
  ListExecutor mpi("mpi", collectives());
  CHECK_THROWS_WITH(claim(final_forward("mlp"), {&cpu, &mpi}), Contains("no executor claims tanh"));
  PipelineOptions o;
  Trace sharded = compile(capture(*make_model("mlp")), o).at(1).traces.at(0);  // the fsdp stage
  CHECK_THROWS_WITH(claim(sharded, {&cpu, &mpi}), Contains("synchronize must be lowered"));
}

TEST_CASE("unknown executor prefixes are unknown ops", "[claim]") {
  CHECK_THROWS_WITH(parse_trace("def f(x):\n  # x: \"cpu f32[2]\"\n  t0 = tpu_tanh(x)  # t0: \"cpu f32[2]\"\n"
                                "  return t0\n",
                                "f.trace"),
                    Contains("unknown op 'tpu_tanh'"));
  auto sym = resolve_symbol_name("mpi_all_gather");
  REQUIRE(sym);
  CHECK(sym->op == OpId::AllGather);
  CHECK(sym->executor == "mpi");
  CHECK(symbol_name(OpId::ConvertElementType, "cpu") == "cpu_convert_element_type");
}

TEST_CASE("a Target is named, parsed and resolved in one place", "[claim][target]") {
  for (Target t : {Target::cpu, Target::cuda}) {
    CHECK(parse_target(target_name(t)) == t);
    CHECK(parse_target_request(target_name(t)) == request_of(t));
    CHECK(target_request_name(request_of(t)) == target_name(t));
    // auto is resolved once; a named target needs no device query.
    CHECK(resolve_target(request_of(t), false) == t);
    CHECK(resolve_target(request_of(t), true) == t);
  }
  CHECK(target_names() == std::vector<std::string>{"cpu", "cuda"});
  CHECK(target_request_names() == std::vector<std::string>{"cpu", "cuda", "auto"});
  CHECK(parse_target_request("auto") == TargetRequest::automatic);
  CHECK_FALSE(parse_target("auto"));
  CHECK_FALSE(parse_target_request("gpu"));
  CHECK(resolve_target(TargetRequest::automatic, true) == Target::cuda);
  CHECK(resolve_target(TargetRequest::automatic, false) == Target::cpu);
  CHECK(resolve_target(TargetRequest::automatic) == (cuda_available() ? Target::cuda : Target::cpu));
  CHECK(device_name(target_device(Target::cpu)) == "cpu");
  CHECK(device_name(target_device(Target::cuda)) == "cuda:0");
  // The target's compute executor prints its statements with the target's name.
  CHECK(executors_for(Target::cpu).front()->name() == target_name(Target::cpu));
#ifdef FSDPC_HAVE_CUDA
  CHECK(executors_for(Target::cuda).front()->name() == target_name(Target::cuda));
#else
  CHECK_THROWS_WITH(executors_for(Target::cuda), Contains("this build has no CUDA executor"));
#endif
}
