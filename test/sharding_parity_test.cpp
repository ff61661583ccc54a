// The FSDP promise on the float64 reference executor: training sharded over
// N simulated ranks gives the same loss and gradients as one process, for
// every strategy, N in {1, 2, 3, 4}, on the tutorial mlp, gpt2-tiny and llama-tiny.
// Each rank gets its own slice of the global batch (DistributedSampler
// semantics), so the data-parallel averaging is checked too. Mixed precision
// (autocast) runs here too: the reference computes every float dtype exactly,
// so its casts must leave the math, gradients included, unchanged.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "executors/reference/reference.h"
#include "frontend/models/registry.h"
#include "ir/error.h"
#include "passes/fsdp.h"
#include "passes/grad.h"
#include "passes/pipeline.h"
#include "test/parity_values.h"

using namespace fsdpc;
using reference::Value;
using test::random_value;
using test::rows;

namespace {

struct Case {
  std::string model;
  Strategy strategy;
  Mesh mesh;
  bool bucketing = false;
  DType precision = DType::f32;
  RematMode remat = RematMode::none;
};



struct Unsharded {
  std::vector<Value> args;  // inputs of the global batch, then parameters
  Value cotangent;
  std::vector<Value> outputs;  // loss/output, then full gradients
};

Unsharded run_unsharded(const Case& c, int world, std::mt19937& rng) {
  auto model = make_model(c.model);
  CaptureOptions o;
  o.batch = c.model == "mlp" ? 4 * world : 2 * world;
  if (c.model != "mlp") o.seq = 8;
  Trace joint = grad(capture(*model, o));
  Unsharded u;
  for (const Proxy& a : joint.args) {
    if (a.name == fsdpc::kCotangentArg) break;
    bool tokens = a.type.dtype == DType::i64;
    u.args.push_back(random_value(a.type, rng, a.is_param() ? 0.3 : 1.0, tokens ? 256 : 0));
  }
  const TensorType& ct = joint.args.back().type;
  u.cotangent = c.model == "mlp" ? random_value(ct, rng, 1.0) : Value{ct, {1.0}};
  std::vector<Value> args = u.args;
  // The sharded run averages over ranks; the unsharded sum over the global
  // batch of a non-mean output equals world x that average.
  Value scaled = u.cotangent;
  if (c.model == "mlp")
    for (double& x : scaled.data) x /= world;
  args.push_back(scaled);
  u.outputs = reference::run(joint, args);
  return u;
}

void check_parity(const Case& c) {
  const int world = c.mesh.world();
  INFO(c.model << " " << strategy_name(c.strategy) << " mesh " << c.mesh.replicas << "x" << c.mesh.shards
               << (c.bucketing ? " bucketed" : "") << " " << dtype_name(c.precision) << " remat "
               << remat_name(RematOptions{c.remat}));
  std::mt19937 rng(1234 + world);
  Unsharded u = run_unsharded(c, world, rng);

  auto model = make_model(c.model);
  CaptureOptions o;
  o.batch = c.model == "mlp" ? 4 : 2;
  if (c.model != "mlp") o.seq = 8;
  PipelineOptions po;
  po.strategy = c.strategy;
  po.mesh = c.mesh;
  po.bucketing = c.bucketing;
  po.precision = c.precision;
  po.remat.mode = c.remat;
  std::vector<Stage> stages = compile(capture(*model, o), po);
  const Trace& fwd = stages.back().traces.at(0);
  const Trace& bwd = stages.back().traces.at(1);

  // Rank r: its slice of the global batch, its shard of every parameter.
  std::vector<std::vector<Value>> fwd_args(static_cast<size_t>(world));
  size_t n_inputs = 0;
  for (const Proxy& a : fwd.args) n_inputs += !a.is_param();
  for (int r = 0; r < world; ++r) {
    for (size_t i = 0; i < fwd.args.size(); ++i) {
      const Proxy& p = fwd.args[i];
      if (p.name == fsdpc::kCotangentArg) {  // the fused head's gradients in the forward (head_grad_forward)
        fwd_args[r].push_back(u.cotangent);
        continue;
      }
      const Value& full = u.args.at(i);
      if (!p.is_param()) {
        int64_t b = full.type.shape[0] / world;
        fwd_args[r].push_back(rows(full, r * b, (r + 1) * b));
      } else if (p.type.dist == DistType::fully_sharded) {
        int64_t c_rows = p.type.shape[0], s = r % c.mesh.shards;
        fwd_args[r].push_back(rows(full, s * c_rows, (s + 1) * c_rows));
      } else {
        fwd_args[r].push_back(full);
      }
      fwd_args[r].back().type = p.type;
    }
  }
  auto fwd_out = reference::run_spmd(fwd, c.mesh, fwd_args);

  std::vector<std::vector<Value>> bwd_args(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    bwd_args[r].assign(fwd_out[r].begin() + 1, fwd_out[r].end());  // saved
    Value ct = u.cotangent;
    if (c.model == "mlp") ct = rows(ct, r * 4, (r + 1) * 4);
    if (bwd.args.back().name == fsdpc::kCotangentArg) bwd_args[r].push_back(ct);
    REQUIRE(bwd_args[r].size() == bwd.args.size());
    for (size_t i = 0; i < bwd.args.size(); ++i) bwd_args[r][i].type = bwd.args[i].type;
  }
  auto grads = reference::run_spmd(bwd, c.mesh, bwd_args);

  // Loss: the mean of the ranks' local means is the global mean.
  if (c.model != "mlp") {
    double mean = 0;
    for (int r = 0; r < world; ++r) mean += fwd_out[r][0].data[0] / world;
    CHECK(mean == Approx(u.outputs[0].data[0]).epsilon(1e-12));
  }
  // Gradients: the shards of replica 0's shard group, concatenated and
  // unpadded, equal the full gradient; replicated gradients equal it on every rank.
  size_t gi = 0;
  for (size_t i = 0; i < fwd.args.size(); ++i) {
    const Proxy& p = fwd.args[i];
    if (!p.is_param()) continue;
    const Value& expect = u.outputs.at(1 + gi);
    for (int r = 0; r < world; ++r) {
      const Value& g = grads[r].at(gi);
      int64_t s = r % c.mesh.shards;
      Value want = p.type.dist == DistType::fully_sharded ? rows(expect, s * g.type.shape[0], (s + 1) * g.type.shape[0])
                                                          : expect;
      REQUIRE(g.data.size() == want.data.size());
      INFO("gradient of " << p.name << " on rank " << r);
      CHECK(test::worst_relative_error(g, want) < 1e-12);
    }
    ++gi;
  }
}

std::vector<Case> cases(const std::string& model) {
  std::vector<Case> out;
  for (int n = 1; n <= 4; ++n)
    for (Strategy s : {Strategy::zero3, Strategy::zero2, Strategy::no_shard})
      out.push_back({model, s, flat_mesh(n)});
  for (Strategy s : {Strategy::hybrid, Strategy::hybrid_zero2}) {
    out.push_back({model, s, Mesh{2, 2}});
    out.push_back({model, s, Mesh{1, 3}});
    out.push_back({model, s, Mesh{2, 1}});
  }
  out.push_back({model, Strategy::zero3, flat_mesh(3), /*bucketing=*/true});
  out.push_back({model, Strategy::hybrid, Mesh{2, 2}, /*bucketing=*/true});
  // One shard per replica: elide leaves lone replica all_reduces, bucketed per unit.
  out.push_back({model, Strategy::hybrid, Mesh{2, 1}, /*bucketing=*/true});
  out.push_back({model, Strategy::hybrid_zero2, Mesh{3, 1}, /*bucketing=*/true, DType::bf16});
  for (Strategy s : {Strategy::zero3, Strategy::zero2, Strategy::no_shard})
    for (int n : {1, 3}) out.push_back({model, s, flat_mesh(n), false, DType::bf16});
  out.push_back({model, Strategy::hybrid, Mesh{2, 2}, false, DType::bf16});
  out.push_back({model, Strategy::zero3, flat_mesh(3), /*bucketing=*/true, DType::bf16});
  out.push_back({model, Strategy::zero2, flat_mesh(2), /*bucketing=*/true, DType::bf16});
  out.push_back({model, Strategy::hybrid, Mesh{2, 2}, /*bucketing=*/true, DType::bf16});
  return out;
}

// Rematerialisation changes what the backward receives and recomputes, never
// the numbers: every mode, every strategy, N = 1..4, buckets and bf16.
std::vector<Case> remat_cases(const std::string& model) {
  std::vector<Case> out;
  for (RematMode m : {RematMode::block, RematMode::selective, RematMode::auto_cut}) {
    for (int n = 1; n <= 4; ++n)
      for (Strategy s : {Strategy::zero3, Strategy::zero2, Strategy::no_shard})
        out.push_back({model, s, flat_mesh(n), false, DType::f32, m});
    for (Strategy s : {Strategy::hybrid, Strategy::hybrid_zero2})
      out.push_back({model, s, Mesh{2, 2}, false, DType::f32, m});
    out.push_back({model, Strategy::zero3, flat_mesh(3), /*bucketing=*/true, DType::f32, m});
    out.push_back({model, Strategy::zero2, flat_mesh(2), /*bucketing=*/true, DType::bf16, m});
  }
  return out;
}

}  // namespace

TEST_CASE("sharded mlp matches the unsharded one for every strategy and world", "[parity]") {
  for (const Case& c : cases("mlp")) check_parity(c);
}

TEST_CASE("sharded gpt2-tiny matches the unsharded one for every strategy and world", "[parity]") {
  for (const Case& c : cases("gpt2-tiny")) check_parity(c);
}

TEST_CASE("rematerialised gpt2-tiny matches the unsharded one for every mode, strategy and world", "[parity][remat]") {
  for (const Case& c : remat_cases("gpt2-tiny")) check_parity(c);
}

TEST_CASE("sharded llama-tiny matches the unsharded one for every strategy and world", "[parity][llama]") {
  for (const Case& c : cases("llama-tiny")) check_parity(c);
}
