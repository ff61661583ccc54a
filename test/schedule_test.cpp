// The schedule pass on the built-in models: prefetch distance, the in-flight
// limit (counted by walking the trace), waits right before their first
// consumer, gradient collectives issued early and waited late; and, on the
// float64 reference executor, bucketed + scheduled traces compute exactly
// what the split traces compute.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "executors/reference/reference.h"
#include "frontend/models/registry.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/grad.h"
#include "passes/pipeline.h"
#include "passes/schedule.h"

using namespace fsdpc;

namespace {

Trace captured(const std::string& model) { return capture(*make_model(model)); }

PipelineOptions options(Strategy s, int world, bool bucketing = true, int prefetch = 1, int max_inflight = 2) {
  PipelineOptions o;
  o.strategy = s;
  o.mesh = flat_mesh(world);
  o.bucketing = bucketing;
  o.prefetch = prefetch;
  o.max_inflight = max_inflight;
  return o;
}

const Stage& stage(const std::vector<Stage>& stages, const std::string& name) {
  for (const Stage& s : stages)
    if (s.name == name) return s;
  FAIL("no stage " << name);
  return stages.front();
}

bool is_comm(OpId op) {
  return op == OpId::AllGather || op == OpId::ReduceScatter || op == OpId::AllReduce || op == OpId::Wait ||
         op == OpId::Pack || op == OpId::Unpack;
}

// A parameter all_gather, its wait, the reshape/slice/unpack statements that
// only cut the gathered value up, and the first statement that uses it.
struct GatherSite {
  size_t issue = 0, wait = 0, first_use = 0;
  std::unordered_set<size_t> tail;
};

std::vector<GatherSite> gather_sites(const Trace& t) {
  std::unordered_map<std::string, size_t> def;
  for (size_t i = 0; i < t.bsyms.size(); ++i)
    for (const Proxy& o : t.bsyms[i].outputs) def[o.name] = i;
  std::vector<GatherSite> sites;
  for (size_t i = 0; i < t.bsyms.size(); ++i) {
    if (t.bsyms[i].op != OpId::AllGather) continue;
    GatherSite s;
    s.issue = i;
    std::unordered_set<std::string> values{t.bsyms[i].output().name};
    s.first_use = t.bsyms.size();
    for (size_t j = i + 1; j < t.bsyms.size(); ++j) {
      const BoundSymbol& b = t.bsyms[j];
      bool reads = false;
      for (const Operand& in : b.inputs) reads = reads || values.count(in.name);
      if (!reads) continue;
      const bool cuts = b.op == OpId::Reshape || b.op == OpId::Slice || b.op == OpId::Unpack;
      if (b.op == OpId::Wait) {
        s.wait = j;
      } else if (!cuts) {
        s.first_use = std::min(s.first_use, j);
        continue;
      } else {
        s.tail.insert(j);
      }
      for (const Proxy& o : b.outputs) values.insert(o.name);
    }
    sites.push_back(s);
  }
  return sites;
}

// The most all_gathers issued and not yet waited at any point.
int max_outstanding(const Trace& t) {
  std::unordered_set<std::string> open;
  size_t most = 0;
  for (const BoundSymbol& b : t.bsyms) {
    if (b.op == OpId::AllGather) open.insert(b.output().name);
    if (b.op == OpId::Wait) open.erase(b.inputs[0].name);
    most = std::max(most, open.size());
  }
  return static_cast<int>(most);
}

// The statements are those of `before`, reordered.
void check_permutation(const Trace& before, const Trace& after) {
  REQUIRE(after.bsyms.size() == before.bsyms.size());
  std::unordered_map<std::string, const BoundSymbol*> by_output;
  for (const BoundSymbol& b : before.bsyms) by_output[b.outputs.at(0).name] = &b;
  for (const BoundSymbol& b : after.bsyms) {
    auto it = by_output.find(b.outputs.at(0).name);
    REQUIRE(it != by_output.end());
    CHECK(*it->second == b);
  }
  CHECK(after.args == before.args);
  CHECK(after.returns == before.returns);
}

}  // namespace

TEST_CASE("schedule: every stage verifies, for every strategy, bucketed or not", "[schedule]") {
  for (Strategy s : {Strategy::zero3, Strategy::zero2, Strategy::no_shard}) {
    for (bool bucketing : {false, true}) {
      for (const char* model : {"mlp", "gpt2-tiny"}) {
        const std::vector<Stage> stages = compile(captured(model), options(s, 3, bucketing));
        for (const Stage& st : stages)
          for (const Trace& t : st.traces) REQUIRE_NOTHROW(verify(t));
        for (size_t i = 0; i < 2; ++i) {
          const Trace& sched = stage(stages, "schedule").traces[i];
          CHECK(sched.provenance == "schedule");
          check_permutation(stage(stages, "bucketing").traces[i], sched);
        }
      }
    }
  }
}

TEST_CASE("schedule: prefetch 1 issues unit i+1's all_gather before unit i's first consumer",
          "[schedule]") {
  const std::vector<Stage> stages = compile(captured("gpt2-tiny"), options(Strategy::zero3, 2));
  for (const Trace& t : stage(stages, "schedule").traces) {
    const std::vector<GatherSite> sites = gather_sites(t);
    REQUIRE(sites.size() == 3);
    for (size_t i = 0; i + 1 < sites.size(); ++i) {
      CHECK(sites[i].first_use < sites[i + 1].first_use);  // units in order of use
      CHECK(sites[i + 1].issue < sites[i].first_use);
      CHECK(sites[i + 1].issue > sites[0].issue);
    }
    // Not every gather hoisted to the top: the last unit waits for the first's use.
    CHECK(sites.back().issue > sites[0].wait);
  }
}

TEST_CASE("schedule: never more than max_inflight all_gathers outstanding", "[schedule]") {
  const Trace gpt = captured("gpt2-tiny");
  for (bool bucketing : {false, true}) {
    for (int prefetch : {0, 1, 2, 4}) {
      for (int inflight : {1, 2, 3}) {
        for (Strategy s : {Strategy::zero3, Strategy::zero2}) {
          const std::vector<Stage> stages = compile(gpt, options(s, 2, bucketing, prefetch, inflight));
          for (const Trace& t : stage(stages, "schedule").traces) CHECK(max_outstanding(t) <= inflight);
          // Bucketed, the forward's 3 units reach the limit that prefetch allows.
          if (bucketing)
            CHECK(max_outstanding(stage(stages, "schedule").traces[0]) == std::min({inflight, prefetch + 1, 3}));
        }
      }
    }
  }
}

TEST_CASE("schedule: each wait sits right before its first consumer", "[schedule]") {
  for (int prefetch : {0, 1, 2}) {
    const std::vector<Stage> stages =
        compile(captured("gpt2-tiny"), options(Strategy::zero3, 2, true, prefetch, 2));
    for (const Trace& t : stage(stages, "schedule").traces) {
      for (const GatherSite& s : gather_sites(t)) {
        REQUIRE(s.wait < s.first_use);
        // Between them: only this gather's tail and other gathers being issued or waited.
        for (size_t j = s.wait + 1; j < s.first_use; ++j) {
          INFO("statement " << j << ": " << op_name(t.bsyms[j].op));
          CHECK((s.tail.count(j) || is_comm(t.bsyms[j].op) || t.bsyms[j].op == OpId::Reshape ||
                 t.bsyms[j].op == OpId::Slice));
        }
        if (prefetch == 0) CHECK(s.wait == s.issue + 1);  // issued right before its wait
      }
    }
  }
}

TEST_CASE("schedule: prefetch 0 issues each all_gather right before its wait", "[schedule]") {
  const std::vector<Stage> stages = compile(captured("mlp"), options(Strategy::zero3, 3, true, 0, 2));
  for (const Trace& t : stage(stages, "schedule").traces)
    for (const GatherSite& s : gather_sites(t)) CHECK(s.wait == s.issue + 1);
}

TEST_CASE("schedule: gradient collectives are issued as soon as ready and waited late", "[schedule]") {
  for (Strategy s : {Strategy::zero3, Strategy::no_shard}) {
    for (bool bucketing : {false, true}) {
      PipelineOptions o = options(s, 2, bucketing);
      o.bucket_mb = 0.1;
      const std::vector<Stage> stages = compile(captured("gpt2-tiny"), o);
      const Trace& t = stage(stages, "schedule").traces[1];
      std::vector<size_t> issues;
      size_t last_compute = 0;
      for (size_t i = 0; i < t.bsyms.size(); ++i) {
        const OpId op = t.bsyms[i].op;
        if (op == OpId::ReduceScatter || (op == OpId::AllReduce && s == Strategy::no_shard)) issues.push_back(i);
        if (!is_comm(op)) last_compute = i;
      }
      REQUIRE(issues.size() > 1);
      for (size_t k : issues) {
        // What feeds the collective follows right after the statement that
        // made its last input (with, when max_inflight reductions are
        // outstanding, the oldest one's wait [+ unpack] in between).
        size_t j = k - 1;
        while (j > 0 && (t.bsyms[j].op == OpId::Div || t.bsyms[j].op == OpId::Pad ||
                         t.bsyms[j].op == OpId::Reshape || t.bsyms[j].op == OpId::Cat ||
                         t.bsyms[j].op == OpId::Pack || t.bsyms[j].op == OpId::Wait ||
                         t.bsyms[j].op == OpId::Unpack))
          --j;
        bool feeds = false;
        for (const Proxy& o : t.bsyms[j].outputs)
          for (size_t u = j + 1; u <= k; ++u)
            for (const Operand& in : t.bsyms[u].inputs) feeds = feeds || in.name == o.name;
        CHECK(feeds);
      }
      // The first one overlaps later compute: its wait comes after compute
      // that follows its issue; the last one's wait after the last compute.
      CHECK(issues.front() < last_compute);
      size_t outstanding = 0, most = 0;
      for (size_t i = 0; i < t.bsyms.size(); ++i) {
        const BoundSymbol& b = t.bsyms[i];
        if (b.op == OpId::ReduceScatter || (b.op == OpId::AllReduce && s == Strategy::no_shard))
          most = std::max(most, ++outstanding);
        for (size_t k : issues)
          if (b.op == OpId::Wait && b.inputs[0].name == t.bsyms[k].output().name) {
            --outstanding;
            if (k == issues.front()) CHECK(i > k + 1);
            if (k == issues.back()) CHECK(i > last_compute);
          }
      }
      CHECK(most <= static_cast<size_t>(o.max_inflight));  // the reduction limit
    }
  }
}

TEST_CASE("schedule: deterministic, and options are checked", "[schedule]") {
  const Trace t = captured("gpt2-tiny");
  const PipelineOptions o = options(Strategy::zero3, 2);
  const std::vector<Stage> a = compile(t, o), b = compile(t, o);
  for (size_t i = 0; i < 2; ++i)
    CHECK(print_trace(stage(a, "schedule").traces[i]) == print_trace(stage(b, "schedule").traces[i]));
  const Trace& fwd = stage(a, "bucketing").traces[0];
  CHECK_THROWS_AS(schedule(fwd, ScheduleOptions{-1, 2, {}}), Error);
  CHECK_THROWS_AS(schedule(fwd, ScheduleOptions{1, 0, {}}), Error);
  // Without units every all_gather is a unit of its own; still valid.
  for (const Trace& tr : stage(a, "bucketing").traces) {
    const Trace s = schedule(tr, ScheduleOptions{1, 2, {}});
    REQUIRE_NOTHROW(verify(s));
    CHECK(max_outstanding(s) <= 2);
  }
}

// ---------------------------------------------------------------------------
// Numerics: bucketed + scheduled traces against the split traces, in float64.

namespace {

using reference::Value;
using Values = std::vector<Value>;

// Rank r's arguments for `fwd`: parameters are the padded shards (rows
// [s*c, (s+1)*c) of the full value, s = r's index in its shard group);
// inputs are the same on every rank.
std::vector<Values> forward_args(const Trace& captured_trace, const Trace& fwd, const Mesh& mesh) {
  std::mt19937 rng(1234);
  std::uniform_real_distribution<double> real(-0.5, 0.5);
  std::unordered_map<std::string, std::vector<double>> full;
  std::unordered_map<std::string, Shape> full_shape;
  for (const Proxy& a : captured_trace.args) {
    std::vector<double> data(numel(a.type.shape));
    for (double& x : data) x = is_integer(a.type.dtype) ? static_cast<double>(rng() % 64) : real(rng);
    full[a.name] = std::move(data);
    full_shape[a.name] = a.type.shape;
  }
  std::vector<Values> args(mesh.world());
  for (int r = 0; r < mesh.world(); ++r) {
    const int64_t s = r % mesh.shards;
    for (const Proxy& a : fwd.args) {
      if (a.name == fsdpc::kCotangentArg) {  // the fused head's gradients in the forward (head_grad_forward)
        args[r].push_back(reference::make_value(a.type, std::vector<double>(numel(a.type.shape), 1.0)));
        continue;
      }
      const std::vector<double>& f = full.at(a.name);
      if (a.type.shape == full_shape.at(a.name) && a.type.dist != DistType::fully_sharded) {
        args[r].push_back(reference::make_value(a.type, f));
        continue;
      }
      const int64_t rows = a.type.shape[0], row = numel(a.type.shape) / rows;
      std::vector<double> shard(numel(a.type.shape), 0.0);
      for (int64_t i = 0; i < rows * row; ++i) {
        const int64_t at = s * rows * row + i;
        if (at < static_cast<int64_t>(f.size())) shard[i] = f[at];
      }
      args[r].push_back(reference::make_value(a.type, std::move(shard)));
    }
  }
  return args;
}

// Runs forward then backward (saved values + a cotangent of ones, which
// the forward takes instead under head_grad_forward); returns
// every rank's forward results followed by its gradients.
std::vector<Values> run_both(const Trace& fwd, const Trace& bwd, const std::vector<Values>& args, const Mesh& mesh) {
  std::vector<Values> out = reference::run_spmd(fwd, mesh, args);
  std::vector<std::string> outputs;
  fwd.returns.items.at(0).collect_names(outputs);
  std::vector<Values> bargs(out.size());
  for (size_t r = 0; r < out.size(); ++r) {
    bargs[r].assign(out[r].begin() + static_cast<long>(outputs.size()), out[r].end());
    const Proxy& ct = bwd.args.back();
    if (ct.name == fsdpc::kCotangentArg)  // unless the forward took it
      bargs[r].push_back(reference::make_value(ct.type, std::vector<double>(numel(ct.type.shape), 1.0)));
    REQUIRE(bargs[r].size() == bwd.args.size());
  }
  std::vector<Values> grads = reference::run_spmd(bwd, mesh, bargs);
  for (size_t r = 0; r < out.size(); ++r) out[r].insert(out[r].end(), grads[r].begin(), grads[r].end());
  return out;
}

void check_same_numbers(const std::string& model, const PipelineOptions& o) {
  INFO(model << " " << strategy_name(o.strategy) << " mesh " << o.mesh.replicas << "x" << o.mesh.shards);
  const Trace t = captured(model);
  const std::vector<Stage> stages = compile(t, o);
  const Stage& split = stage(stages, "split");
  const Stage& sched = stage(stages, "schedule");
  const std::vector<Values> args = forward_args(t, split.traces[0], o.mesh);
  const std::vector<Values> want = run_both(split.traces[0], split.traces[1], args, o.mesh);
  const std::vector<Values> got = run_both(sched.traces[0], sched.traces[1], args, o.mesh);
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (size_t r = 0; r < want.size(); ++r) {
    REQUIRE(got[r].size() == want[r].size());
    for (size_t i = 0; i < want[r].size(); ++i) {
      REQUIRE(got[r][i].type.shape == want[r][i].type.shape);
      for (size_t k = 0; k < want[r][i].data.size(); ++k) {
        const double w = want[r][i].data[k], g = got[r][i].data[k];
        worst = std::max(worst, std::abs(g - w) / std::max(1.0, std::abs(w)));
      }
    }
  }
  CHECK(worst <= 1e-12);
}

}  // namespace

TEST_CASE("schedule: bucketed and scheduled traces compute what the split traces do", "[schedule][numeric]") {
  check_same_numbers("mlp", options(Strategy::zero3, 2));
  check_same_numbers("mlp", options(Strategy::zero3, 3));  // padded shards
  check_same_numbers("mlp", options(Strategy::zero2, 3));
  check_same_numbers("mlp", options(Strategy::no_shard, 2));
  PipelineOptions hybrid = options(Strategy::hybrid, 1);
  hybrid.mesh = Mesh{2, 2};
  check_same_numbers("mlp", hybrid);
  check_same_numbers("gpt2-tiny", options(Strategy::zero3, 2));
  check_same_numbers("gpt2-tiny", options(Strategy::zero3, 3, true, 0, 1));
  check_same_numbers("gpt2-tiny", options(Strategy::zero2, 2, true, 2, 3));
  PipelineOptions ddp = options(Strategy::no_shard, 2);
  ddp.bucket_mb = 0.1;  // several buckets
  check_same_numbers("gpt2-tiny", ddp);
  hybrid.mesh = Mesh{2, 3};
  hybrid.strategy = Strategy::hybrid_zero2;
  check_same_numbers("gpt2-tiny", hybrid);
}
