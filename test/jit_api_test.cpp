// The C++ API of frontend/jit.h, as docs/api.md promises it:
// forward() returns the model's loss (the reference executor's, and the
// loss train_step reports before its update); stages() holds every pass's
// verified traces in pipeline order; full_state_dict() holds every
// parameter by name with its full shape and the values the shards hold
// (at initialisation: the counter-based init, for one rank and for two
// ranks under mpirun).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "executors/claim.h"
#include "executors/comm/mpi_world.h"
#include "executors/reference/reference.h"
#include "frontend/jit.h"
#include "frontend/models/registry.h"
#include "ir/verifier.h"
#include "passes/fsdp.h"
#include "passes/registry.h"
#include "runtime/init.h"
#include "test/run_cli.h"

using namespace fsdpc;

namespace {

ParamInit runtime_init(const Init& i) {
  switch (i.kind) {
    case Init::Kind::normal: return {ParamInit::Kind::normal, i.scale};
    case Init::Kind::uniform: return {ParamInit::Kind::uniform, i.scale};
    case Init::Kind::zeros: return {ParamInit::Kind::zeros, 0.0};
    case Init::Kind::ones: return {ParamInit::Kind::ones, 0.0};
  }
  return {};
}

// Rows [row_begin, row_begin + rows) of a parameter as initialised with `seed`.
std::vector<float> init_rows(const NamedParam& p, int64_t row_begin, int64_t rows, uint64_t seed) {
  const Shape& s = p.spec->shape;
  const int64_t per_row = s.empty() ? 1 : numel(s) / s[0];
  std::vector<float> out(static_cast<size_t>(rows * per_row));
  init_shard(out.data(), s, row_begin, rows, runtime_init(p.spec->init), seed, p.path);
  return out;
}

int64_t rows_of(const Shape& s) { return s.empty() ? 1 : s[0]; }

// gpt2-tiny's inputs (idx, targets) for `batch` x `seq`: a fixed pattern,
// different per rank.
std::vector<HostTensor> tokens(int64_t batch, int64_t seq, int rank) {
  std::vector<int64_t> idx(static_cast<size_t>(batch * seq)), targets(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) {
    idx[i] = static_cast<int64_t>((i * 37 + 11 + 101 * rank) % 256);
    targets[i] = static_cast<int64_t>((i * 53 + 5 + 7 * rank) % 256);
  }
  return {HostTensor::ints({batch, seq}, idx), HostTensor::ints({batch, seq}, targets)};
}

JitOptions tiny_options(int world, int64_t batch_per_rank) {
  JitOptions o;
  o.capture.batch = batch_per_rank;
  o.capture.seq = 8;
  o.pipeline.mesh = flat_mesh(world);
  o.pipeline.strategy = Strategy::zero3;
  o.pipeline.bucketing = true;
  o.engine.optimizer.kind = OptimizerOptions::Kind::sgd;
  o.engine.optimizer.lr = 0.5;
  o.engine.seed = 7;
  return o;
}

}  // namespace

TEST_CASE("jit: full_state_dict holds every parameter, full shape, the initial values", "[jit][api]") {
  auto model = make_model("gpt2-tiny");
  const JitOptions o = tiny_options(1, 2);
  auto compiled = jit(*model, o);
  const std::map<std::string, HostTensor> state = compiled->full_state_dict();
  const std::vector<NamedParam> params = model->named_parameters();
  REQUIRE(state.size() == params.size());
  for (const NamedParam& p : params) {
    INFO(p.path);
    auto it = state.find(p.path);
    REQUIRE(it != state.end());
    CHECK(it->second.shape == p.spec->shape);
    CHECK(it->second.dtype == DType::f32);
    // Bit for bit the counter-based init of this seed (another seed differs).
    CHECK(it->second.f32 == init_rows(p, 0, rows_of(p.spec->shape), 7));
  }
  // Not a constant: weights are random, layer norms ones, biases zeros.
  REQUIRE(params.front().path == "wte.weight");
  CHECK(state.at("wte.weight").f32 != init_rows(params.front(), 0, 256, 8));
  CHECK(state.at("h.0.ln_1.weight").f32 == std::vector<float>(64, 1.0f));
  CHECK(state.at("h.0.attn.c_attn.bias").f32 == std::vector<float>(192, 0.0f));

  // One rank holds every row: shards() are the same values, from row 0.
  const std::vector<Engine::Shard> shards = compiled->shards();
  REQUIRE(shards.size() == params.size());
  for (const Engine::Shard& s : shards) {
    INFO(s.path);
    CHECK(s.row_begin == 0);
    CHECK(compiled->engine().to_host(*s.value) == state.at(s.path).f32);
  }

  // After a step the dict follows the updated shards.
  compiled->train_step(tokens(2, 8, 0));
  const std::map<std::string, HostTensor> after = compiled->full_state_dict();
  CHECK(after.at("h.0.mlp.c_fc.weight").f32 != state.at("h.0.mlp.c_fc.weight").f32);
  for (const Engine::Shard& s : compiled->shards()) CHECK(compiled->engine().to_host(*s.value) == after.at(s.path).f32);
}

TEST_CASE("jit: forward returns the loss, as the reference computes it and train_step reports it", "[jit][api]") {
  auto model = make_model("gpt2-tiny");
  auto compiled = jit(*model, tiny_options(1, 2));
  const std::vector<HostTensor> batch = tokens(2, 8, 0);

  const std::vector<HostTensor> out = compiled->forward(batch);
  REQUIRE(out.size() == 1);  // GPT-2 returns its loss only
  REQUIRE(out[0].shape.empty());
  const double loss = out[0].f32.at(0);
  CHECK(std::isfinite(loss));
  CHECK(loss > std::log(256.0) * 0.5);  // an untrained model over 256 tokens: near ln 256

  // The captured trace in float64 on the reference executor, with the
  // weights the engine holds.
  const Trace& captured = compiled->stages().front().traces.at(0);
  const std::map<std::string, HostTensor> state = compiled->full_state_dict();
  std::vector<reference::Value> args;
  size_t input = 0;
  for (const Proxy& a : captured.args) {
    std::vector<double> data;
    if (a.is_param()) {
      const std::vector<float>& w = state.at(a.param_path).f32;
      data.assign(w.begin(), w.end());
    } else {
      const std::vector<int64_t>& v = batch.at(input++).i64;
      data.assign(v.begin(), v.end());
    }
    args.push_back(reference::make_value(a.type, std::move(data)));
  }
  const std::vector<reference::Value> ref = reference::run(captured, args);
  CHECK(loss == Approx(ref.at(0).data.at(0)).epsilon(1e-5));

  // forward does not update: a second call gives the same loss bit for bit,
  // and train_step reports it as the loss of the step it then takes.
  CHECK(compiled->forward(batch)[0].f32[0] == out[0].f32[0]);
  const StepResult step = compiled->train_step(batch);
  CHECK(step.loss == Approx(loss).epsilon(1e-6));
  const double next = compiled->forward(batch)[0].f32.at(0);
  CHECK(next < loss);  // SGD at lr 0.5 on this batch lowered it
}

TEST_CASE("jit: stages() holds each pass's verified traces in pipeline order", "[jit][api]") {
  auto model = make_model("gpt2-tiny");
  auto compiled = jit(*model, tiny_options(1, 2));
  const std::vector<Stage>& stages = compiled->stages();
  // The registry's order, less autocast and widen (f32 has no mixed
  // precision to cast or widen), tp (no tensor-parallel dimension) and pp
  // and p2p (no pipeline stages); elide runs, since at world size 1 every
  // collective is over one rank; fuse_head runs, gpt2-tiny's head being
  // fused by default (--loss-chunk), and so does scatter_into, its tied
  // embedding's gradient scattering into the head's, and head_grad_forward,
  // the head's gradients computed with its loss.
  std::vector<std::string> expected;
  for (const PassInfo& p : pass_registry())
    if (p.name != "autocast" && p.name != "widen" && p.name != "tp" && p.name != "pp" && p.name != "p2p")
      expected.push_back(p.name);
  REQUIRE(expected == std::vector<std::string>{"trace", "fuse_head", "fsdp", "grad", "elide", "scatter_into",
                                               "head_grad_forward", "split", "dce", "cse", "bucketing", "schedule",
                                               "del"});
  std::vector<std::string> names;
  for (const Stage& s : stages) names.push_back(s.name);
  CHECK(names == expected);

  bool split_done = false;
  for (size_t i = 0; i < stages.size(); ++i) {
    const Stage& s = stages[i];
    INFO(s.name);
    // One trace until split cuts it in two (forward, backward).
    split_done = split_done || s.name == "split";
    REQUIRE(s.traces.size() == (split_done ? 2u : 1u));
    for (const Trace& t : s.traces) {
      CHECK(t.provenance == s.name);
      CHECK_NOTHROW(verify(t));
    }
    if (split_done) {
      CHECK(s.traces[0].name == "forward");
      CHECK(s.traces[1].name == "backward");
    }
  }
  // The captured trace takes the model's inputs and every parameter
  // (unsharded); from fsdp on the parameters are this rank's shards.
  const Trace& captured = stages[0].traces[0];
  REQUIRE(captured.args.size() == 2 + model->named_parameters().size());
  CHECK(captured.args[0].name == "idx");
  REQUIRE(stages[2].name == "fsdp");
  for (const Proxy& a : stages[2].traces[0].args)
    if (a.is_param()) CHECK(a.type.dist == DistType::fully_sharded);
  // The engine runs what the last stage holds, claimed by the CPU executor
  // and fused (fusion auto is the engine's default).
  const Trace exec = execution_trace(stages.back().traces[0], Target::cpu, FusionMode::automatic);
  CHECK(compiled->engine().forward_trace().bsyms.size() == exec.bsyms.size());
  CHECK(exec.bsyms.size() < stages.back().traces[0].bsyms.size());
}

// Run by the test below under `mpirun -np 2`: each rank holds its own rows
// of every parameter; rank 0's full_state_dict is the whole init (so the
// gathered shards), other ranks get an empty dict; forward returns each
// rank's local loss and train_step their mean.
TEST_CASE("jit on two ranks (run under mpirun)", "[.][jit-spmd]") {
  const int world = mpi_world_size(), rank = mpi_world_rank();
  REQUIRE(world == 2);
  auto model = make_model("gpt2-tiny");
  auto compiled = jit(*model, tiny_options(world, 1));
  const std::vector<NamedParam> params = model->named_parameters();
  const std::vector<Engine::Shard> shards = compiled->shards();
  REQUIRE(shards.size() == params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    INFO(params[i].path);
    REQUIRE(shards[i].path == params[i].path);
    const int64_t rows = shard_rows(rows_of(params[i].spec->shape), world);
    CHECK(shards[i].row_begin == rank * rows);
    // Padding rows past the end are 0 in both.
    CHECK(compiled->engine().to_host(*shards[i].value) == init_rows(params[i], rank * rows, rows, 7));
  }
  const std::map<std::string, HostTensor> state = compiled->full_state_dict();
  if (rank == 0) {
    REQUIRE(state.size() == params.size());
    for (const NamedParam& p : params) {
      INFO(p.path);
      CHECK(state.at(p.path).shape == p.spec->shape);
      CHECK(state.at(p.path).f32 == init_rows(p, 0, rows_of(p.spec->shape), 7));
    }
  } else {
    CHECK(state.empty());
  }
  const std::vector<HostTensor> batch = tokens(1, 8, rank);
  const double local = compiled->forward(batch)[0].f32.at(0);
  const double mean = compiled->engine().mean_over_ranks(local);
  CHECK(compiled->train_step(batch).loss == Approx(mean).epsilon(1e-6));
  std::printf("rank %d checked %zu shards\n", rank, shards.size());
}

TEST_CASE("jit on two ranks: shards, the gathered state dict and forward", "[jit][api][mpi]") {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  // When an earlier case of this process initialised MPI (as a singleton),
  // its OMPI_/PMIX_ variables would make mpiexec's children join it.
  const fsdpc::testing::Run r = fsdpc::testing::run_shell(
      "for v in $(env | grep -oE '^(OMPI|PMIX|OPAL)_[A-Za-z0-9_]*'); do unset $v; done; " +
          fsdpc::testing::mpirun_command(2) + " '" + self + "' '[jit-spmd]'",
      {.merge = true});
  const std::string& text = r.out;
  INFO(text);
  CHECK(r.code == 0);
  // Both ranks ran the case (it cannot pass by being skipped).
  CHECK(text.find("rank 0 checked 28 shards") != std::string::npos);  // gpt2-tiny's 28 parameters
  CHECK(text.find("rank 1 checked 28 shards") != std::string::npos);
}
