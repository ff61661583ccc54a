// --keep-gathered (passes/gather_once.h, runtime/step_traces.h) on the
// float64 reference executor: gathering once, running K micro-batches on the
// whole parameters without synchronising and reducing once gives every
// rank's gradient shards of the synchronising step to 1e-12, under zero3,
// zero2, hybrid and tensor parallelism. Also: the gather issues every
// all_gather before any wait, the step moves the model once instead of once
// (zero2) or twice (zero3) per micro-batch, and what is refused.
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <random>

#include "executors/reference/reference.h"
#include "frontend/models/registry.h"
#include "ir/error.h"
#include "ir/verifier.h"
#include "passes/grad.h"
#include "passes/stats.h"
#include "runtime/step_traces.h"
#include "test/parity_values.h"

using namespace fsdpc;
using reference::Value;
using test::random_value;
using test::rows;

namespace {

constexpr int64_t kRows = 2;  // a micro-batch's rows on one data-parallel rank

struct Case {
  std::string model;
  Strategy strategy;
  Mesh mesh;
  int micro;
};

std::string describe(const Case& c) {
  return c.model + " " + std::string(strategy_name(c.strategy)) + " mesh " + std::to_string(c.mesh.replicas) + "x" +
         std::to_string(c.mesh.shards) + " tp " + std::to_string(c.mesh.tp) + ", " + std::to_string(c.micro) +
         " micro-batches";
}

Trace captured_of(const std::string& model) {
  CaptureOptions o;
  o.batch = kRows;
  o.seq = 8;
  return capture(*make_model(model), o);
}

PipelineOptions options_of(const Case& c) {
  PipelineOptions o;
  o.strategy = c.strategy;
  o.mesh = c.mesh;
  o.tensor_parallel_plan = make_model(c.model)->tensor_parallel_plan();  // as jit() hands it down
  return o;
}

// Rank r of the mesh: tp is the innermost dimension, then shards, then
// replicas (ir/mesh.h); its data-parallel index d is r / tp.
struct Place {
  int d, shard, tp;
};
Place place_of(const Mesh& m, int r) { return {r / m.tp, (r / m.tp) % m.shards, r % m.tp}; }

// A forward's arguments on every rank: parameters from `param` (rank, proxy),
// the inputs' rows of micro-batch `m` of the rank's data-parallel index.
std::vector<std::vector<Value>> forward_args(const Trace& fwd, const Case& c, int m,
                                             const std::map<std::string, Value>& inputs,
                                             const std::function<Value(int, const Proxy&)>& param) {
  const int world = c.mesh.world(), dp = c.mesh.data_parallel();
  std::vector<std::vector<Value>> in(world);
  for (int r = 0; r < world; ++r)
    for (const Proxy& p : fwd.args) {
      if (p.is_param()) {
        in[r].push_back(param(r, p));
        continue;
      }
      if (p.name == fsdpc::kCotangentArg) {  // the fused head's gradients in the forward (head_grad_forward)
        in[r].push_back(Value{p.type, {1.0 / c.micro}});
        continue;
      }
      const int64_t first = (m * dp + place_of(c.mesh, r).d) * kRows;
      in[r].push_back(rows(inputs.at(p.name), first, first + kRows));
    }
  return in;
}

// One micro-batch: forward, then backward with cotangent 1/K (the forward's
// under head_grad_forward); adds each
// rank's gradients into `sum` and returns the ranks' losses.
std::vector<double> micro_step(const StepTraces& t, const Case& c, std::vector<std::vector<Value>> in,
                               std::vector<std::vector<Value>>& sum) {
  const std::vector<std::vector<Value>> outs = reference::run_spmd(t.forward, c.mesh, in);
  const size_t n_out = t.forward.returns.items.at(0).items.size();
  std::vector<std::vector<Value>> bargs(outs.size());
  std::vector<double> losses;
  for (size_t r = 0; r < outs.size(); ++r) {
    losses.push_back(outs[r].at(0).data.at(0));
    bargs[r].assign(outs[r].begin() + static_cast<long>(n_out), outs[r].end());
    if (t.backward.args.back().name == fsdpc::kCotangentArg)  // unless the forward took it
      bargs[r].push_back(Value{t.backward.args.back().type, {1.0 / c.micro}});
  }
  const std::vector<std::vector<Value>> grads = reference::run_spmd(t.backward, c.mesh, bargs);
  if (sum.empty()) {
    sum = grads;
    return losses;
  }
  for (size_t r = 0; r < grads.size(); ++r)
    for (size_t g = 0; g < grads[r].size(); ++g)
      for (size_t k = 0; k < grads[r][g].data.size(); ++k) sum[r][g].data[k] += grads[r][g].data[k];
  return losses;
}

void check_parity(const Case& c) {
  INFO(describe(c));
  const Trace captured = captured_of(c.model);
  const PipelineOptions o = options_of(c);
  const std::vector<std::vector<Stage>> compiled = compile_pipeline(captured, o);
  const std::vector<EngineTraces> per_stage = step_traces(captured, o, compiled, MicroBatchOptions{c.micro, false, true});
  REQUIRE(per_stage.size() == 1);
  const EngineTraces& t = per_stage[0];
  REQUIRE(t.gathered);
  const GatheredStep& g = *t.gathered;
  for (const Trace* tr : {&g.gather, &g.reduce, &g.micro.forward, &g.micro.backward}) {
    INFO(tr->name);
    CHECK_NOTHROW(verify(*tr));
  }

  // The inputs of every micro-batch of every data-parallel rank.
  std::mt19937 rng(1234);
  int64_t vocab = 0;
  for (const Proxy& a : captured.args)
    if (a.is_param() && (a.param_path == "wte.weight" || a.param_path == "model.embed_tokens.weight"))
      vocab = a.type.shape[0];
  std::map<std::string, Value> inputs;
  for (const Proxy& a : captured.args) {
    if (a.is_param()) continue;
    TensorType whole = a.type;
    if (!a.is_param()) whole.shape[0] = kRows * c.mesh.data_parallel() * c.micro;
    inputs[a.name] = random_value(whole, rng, 1.0, a.type.dtype == DType::i64 ? vocab : 0);
  }
  // The parameters as the traces after tp take them: a part cut by tp is
  // random on each tp rank (the parity is between two steps, not with one
  // process); one tp leaves whole is the same on every tp rank. FSDP's
  // shard is then the part's rows.
  std::map<std::string, Value> whole_params;
  for (const Proxy& a : captured.args)
    if (a.is_param()) whole_params[a.name] = random_value(a.type, rng, 0.3);
  std::map<std::string, std::vector<Value>> part;  // proxy -> by tp rank
  for (const Proxy& a : g.micro.forward.args) {
    if (!a.is_param()) continue;
    const Value& w = whole_params.at(a.name);
    for (int k = 0; k < c.mesh.tp; ++k)
      part[a.name].push_back(a.type.shape == w.type.shape ? w : random_value(a.type, rng, 0.3));
  }
  auto shard_of = [&](int r, const Proxy& p) {
    const Place at = place_of(c.mesh, r);
    const Value& whole = part.at(p.name).at(static_cast<size_t>(at.tp));
    if (p.type.dist != DistType::fully_sharded) return whole;
    return rows(whole, at.shard * p.type.shape[0], (at.shard + 1) * p.type.shape[0]);
  };

  // The synchronising step: each micro-batch gathers and reduces.
  std::vector<std::vector<Value>> want;
  std::vector<double> want_losses;
  for (int m = 0; m < c.micro; ++m)
    for (double l : micro_step(t.sync, c, forward_args(t.sync.forward, c, m, inputs, shard_of), want))
      want_losses.push_back(l);

  // The gathered step.
  std::vector<std::vector<Value>> shards(c.mesh.world());
  for (int r = 0; r < c.mesh.world(); ++r)
    for (const Proxy& p : g.gather.args) shards[r].push_back(shard_of(r, p));
  const std::vector<std::vector<Value>> whole = reference::run_spmd(g.gather, c.mesh, shards);
  auto whole_of = [&](int r, const Proxy& p) {
    for (size_t i = 0; i < g.gather.args.size(); ++i)
      if (g.gather.args[i].param_path == p.param_path) return whole.at(r).at(i);
    FAIL("the gather trace has no " << p.param_path);
    return Value{};
  };
  for (int r = 0; r < c.mesh.world(); ++r)  // the gather returns the rank's whole tp part
    for (size_t i = 0; i < g.gather.args.size(); ++i)
      CHECK(test::worst_relative_error(whole[r][i], part.at(g.gather.args[i].name).at(place_of(c.mesh, r).tp)) == 0);
  std::vector<std::vector<Value>> local;
  std::vector<double> losses;
  for (int m = 0; m < c.micro; ++m)
    for (double l : micro_step(g.micro, c, forward_args(g.micro.forward, c, m, inputs, whole_of), local))
      losses.push_back(l);
  const std::vector<std::vector<Value>> got = reference::run_spmd(g.reduce, c.mesh, local);

  REQUIRE(losses.size() == want_losses.size());
  for (size_t i = 0; i < losses.size(); ++i) CHECK(losses[i] == Approx(want_losses[i]).epsilon(1e-12));
  REQUIRE(got.size() == want.size());
  for (size_t r = 0; r < got.size(); ++r) {
    REQUIRE(got[r].size() == want[r].size());
    for (size_t i = 0; i < got[r].size(); ++i) {
      INFO("rank " << r << ", gradient " << g.reduce.args.at(i).name);
      CHECK(got[r][i].type.shape == want[r][i].type.shape);
      CHECK(test::worst_relative_error(got[r][i], want[r][i]) < 1e-12);
    }
  }
}

int64_t first_index(const Trace& t, OpId op) {
  for (size_t i = 0; i < t.bsyms.size(); ++i)
    if (t.bsyms[i].op == op) return static_cast<int64_t>(i);
  return -1;
}

int64_t last_index(const Trace& t, OpId op) {
  int64_t last = -1;
  for (size_t i = 0; i < t.bsyms.size(); ++i)
    if (t.bsyms[i].op == op) last = static_cast<int64_t>(i);
  return last;
}

}  // namespace

TEST_CASE("gathered step: gradient shards equal the synchronising step's to 1e-12 (zero3, zero2, hybrid, tp)",
          "[gather_once]") {
  check_parity({"gpt2-tiny", Strategy::zero3, Mesh{1, 2, 1}, 2});
  check_parity({"gpt2-tiny", Strategy::zero2, Mesh{1, 3, 1}, 3});  // shards padded to 3 ranks
  check_parity({"llama-tiny", Strategy::hybrid, Mesh{2, 2, 1}, 2});
  check_parity({"gpt2-tiny", Strategy::hybrid_zero2, Mesh{2, 2, 1}, 2});
  check_parity({"gpt2-tiny", Strategy::zero3, Mesh{1, 2, 2}, 2});
}

TEST_CASE("gathered step: every all_gather before the first wait; the model moves once per step", "[gather_once]") {
  const Trace captured = captured_of("gpt2-tiny");
  for (const Strategy s : {Strategy::zero3, Strategy::zero2}) {
    INFO(strategy_name(s));
    PipelineOptions o;
    o.strategy = s;
    o.mesh = flat_mesh(2);
    const int k = 4;
    const EngineTraces t = step_traces(captured, o, compile_pipeline(captured, o), MicroBatchOptions{k, false, true}).at(0);
    const GatheredStep& g = *t.gathered;
    int64_t params = 0, with_grad = 0;
    for (const Proxy& a : captured.args)
      if (a.is_param()) {
        ++params;
        with_grad += a.requires_grad;
      }
    const TraceStats gather = trace_stats(g.gather), reduce = trace_stats(g.reduce);
    CHECK(gather.of(OpId::AllGather).count == params);
    CHECK(gather.collective_count == params);
    CHECK(reduce.of(OpId::ReduceScatter).count == with_grad);
    CHECK(reduce.collective_count == with_grad);
    CHECK(last_index(g.gather, OpId::AllGather) < first_index(g.gather, OpId::Wait));
    CHECK(last_index(g.reduce, OpId::ReduceScatter) < first_index(g.reduce, OpId::Wait));
    // The micro-batches move nothing between ranks.
    CHECK(trace_stats(g.micro.forward).collective_count == 0);
    CHECK(trace_stats(g.micro.backward).collective_count == 0);
    // Per step: gathered once and reduced once, against K gathers (zero3:
    // forward and backward, but for the units it keeps from the last
    // forward to the first backward, and the head's weight, whose gradient
    // the forward computes: gpt2-tiny's wte, an eighth of its parameters)
    // and K reductions.
    const TraceStats fwd = trace_stats(t.sync.forward), bwd = trace_stats(t.sync.backward);
    const double once = gather.of(OpId::AllGather).bytes;
    const double sync_gathered =
        k * (fwd.of(OpId::AllGather).bytes + bwd.of(OpId::AllGather).bytes);
    if (s == Strategy::zero2) CHECK(sync_gathered == Approx(k * once));
    else CHECK((sync_gathered > 1.75 * k * once && sync_gathered < 2 * k * once));
    // once per step instead of K times
    CHECK(bwd.of(OpId::ReduceScatter).bytes == Approx(reduce.of(OpId::ReduceScatter).bytes));
  }
}

TEST_CASE("the gathered step refuses no_shard and --no-sync, naming what to use", "[gather_once]") {
  const Trace captured = captured_of("gpt2-tiny");
  PipelineOptions o;
  o.mesh = flat_mesh(2);
  o.strategy = Strategy::no_shard;
  CHECK_THROWS_WITH(step_traces(captured, o, compile_pipeline(captured, o), MicroBatchOptions{2, false, true}),
                    Catch::Contains("--keep-gathered needs a sharded strategy") && Catch::Contains("--no-sync"));
  o.strategy = Strategy::zero3;
  CHECK_THROWS_WITH(step_traces(captured, o, compile_pipeline(captured, o), MicroBatchOptions{2, true, true}),
                    Catch::Contains("drop --no-sync"));
}
