// Bytes each rank moves per step equal the ZeRO formulas for Psi parameter
// elements over N ranks (ring convention of passes/stats.h): zero2 moves
// 2*Psi*(N-1)/N (forward all_gather + gradient reduce_scatter), no_shard
// all-reduces Psi, i.e. 2*Psi*(N-1)/N; zero3 adds the backward re-gather,
// at most Psi*(N-1)/N more (3*Psi in the paper) — fsdpc re-gathers only the
// parameters a VJP reads, so it moves less. Psi counts padded shards.
#include <catch2/catch.hpp>

#include "frontend/models/registry.h"
#include "passes/fsdp.h"
#include "passes/pipeline.h"
#include "passes/stats.h"
#include "passes/wrap.h"

#include <optional>

using namespace fsdpc;

namespace {

struct Volume {
  TraceStats fwd, bwd;
};

Volume volume(const std::string& model, Strategy s, int world, bool bucketing = false,
              std::optional<Mesh> mesh = std::nullopt) {
  PipelineOptions o;
  o.strategy = s;
  o.mesh = mesh ? *mesh : flat_mesh(world);
  o.bucketing = bucketing;
  std::vector<Stage> stages = compile(capture(*make_model(model)), o);
  const Stage& last = stages.back();
  return {trace_stats(last.traces.at(0)), trace_stats(last.traces.at(1))};
}

// Parameter elements, each parameter's dim 0 padded to a multiple of N.
double padded_params(const std::string& model, int world) {
  double psi = 0;
  for (const Proxy& a : capture(*make_model(model)).args) {
    if (!a.is_param()) continue;
    const Shape& s = a.type.shape;
    psi += static_cast<double>(world * shard_rows(s[0], world)) * static_cast<double>(numel(s) / s[0]);
  }
  return psi;
}

}  // namespace

TEST_CASE("zero2 moves 2 Psi (N-1)/N per rank", "[comm]") {
  for (const char* model : {"mlp", "gpt2-tiny"}) {
    for (int n : {2, 3, 4}) {
      INFO(model << " world " << n);
      double psi_bytes = 4 * padded_params(model, n), ring = (n - 1.0) / n;
      for (bool bucketing : {false, true}) {
        Volume v = volume(model, Strategy::zero2, n, bucketing);
        CHECK(v.fwd.of(OpId::AllGather).bytes == Approx(psi_bytes * ring));
        CHECK(v.bwd.of(OpId::AllGather).count == 0);
        CHECK(v.bwd.of(OpId::ReduceScatter).bytes == Approx(psi_bytes * ring));
        CHECK(v.fwd.collective_bytes + v.bwd.collective_bytes == Approx(2 * psi_bytes * ring));
      }
    }
  }
}

TEST_CASE("zero3 moves at most 3 Psi (N-1)/N per rank, re-gathering only what the backward reads", "[comm]") {
  for (const char* model : {"mlp", "gpt2-tiny"}) {
    for (int n : {2, 3, 4}) {
      INFO(model << " world " << n);
      double psi_bytes = 4 * padded_params(model, n), ring = (n - 1.0) / n;
      Volume v = volume(model, Strategy::zero3, n);
      CHECK(v.fwd.of(OpId::AllGather).bytes == Approx(psi_bytes * ring));
      CHECK(v.bwd.of(OpId::ReduceScatter).bytes == Approx(psi_bytes * ring));
      CHECK(v.bwd.of(OpId::AllGather).bytes > 0);
      CHECK(v.bwd.of(OpId::AllGather).bytes <= psi_bytes * ring);
      CHECK(v.fwd.collective_bytes + v.bwd.collective_bytes <= Approx(3 * psi_bytes * ring));
    }
  }
  // The tutorial mlp: only the second weight is read by the backward (the
  // first layer's input needs no gradient), so one of the two is re-gathered.
  Volume v = volume("mlp", Strategy::zero3, 2);
  CHECK(v.bwd.of(OpId::AllGather).count == 1);
  CHECK(v.bwd.of(OpId::AllGather).bytes == Approx(64 * 64 * 4 * 0.5));
}

TEST_CASE("no_shard all-reduces Psi per rank", "[comm]") {
  for (const char* model : {"mlp", "gpt2-tiny"}) {
    for (int n : {2, 3, 4}) {
      INFO(model << " world " << n);
      double psi_bytes = 4 * padded_params(model, 1), ring = (n - 1.0) / n;
      Volume v = volume(model, Strategy::no_shard, n);
      CHECK(v.fwd.collective_count == 0);
      CHECK(v.bwd.of(OpId::AllGather).count == 0);
      CHECK(v.bwd.of(OpId::ReduceScatter).count == 0);
      CHECK(v.bwd.of(OpId::AllReduce).bytes == Approx(2 * psi_bytes * ring));
    }
  }
}

TEST_CASE("hybrid with one shard per replica all-reduces Psi, one collective per unit when bucketed", "[comm]") {
  for (const char* model : {"mlp", "gpt2-tiny"}) {
    for (int r : {2, 3}) {
      INFO(model << " replicas " << r);
      double psi_bytes = 4 * padded_params(model, 1), ring = (r - 1.0) / r;
      const auto units = static_cast<int64_t>(wrap_units(capture(*make_model(model)), PipelineOptions{}.wrap).size());
      for (Strategy s : {Strategy::hybrid, Strategy::hybrid_zero2}) {
        Volume unbucketed = volume(model, s, r, false, Mesh{r, 1});
        Volume bucketed = volume(model, s, r, true, Mesh{r, 1});
        for (const Volume& v : {unbucketed, bucketed}) {
          CHECK(v.fwd.collective_count == 0);
          CHECK(v.bwd.of(OpId::ReduceScatter).count == 0);
          CHECK(v.bwd.of(OpId::AllReduce).bytes == Approx(2 * psi_bytes * ring));
        }
        CHECK(bucketed.bwd.of(OpId::AllReduce).count == units);
        CHECK(unbucketed.bwd.of(OpId::AllReduce).count > units);
      }
    }
  }
}

TEST_CASE("each rank holds about 1/N of the parameters", "[comm]") {
  for (int n : {1, 2, 3, 4}) {
    Volume v = volume("gpt2-tiny", Strategy::zero3, n);
    double full = 4 * padded_params("gpt2-tiny", 1), sharded = 4 * padded_params("gpt2-tiny", n) / n;
    INFO("world " << n);
    CHECK(static_cast<double>(v.fwd.param_bytes) == Approx(sharded));
    // Padding adds at most N-1 rows per parameter: 3% for gpt2-tiny's 64-row vectors at N=3.
    CHECK(static_cast<double>(v.fwd.param_bytes) <= full / n * 1.04);
  }
}
