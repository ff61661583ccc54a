// What fsdpc advise's candidates are: every strategy with the knobs that
// change its schedule (and, when asked, DiLoCo and int8 gathers), the
// options each compiles with, and the flags and name each is shown by.
// runtime/planner/candidates.cpp compiles, plans and times them.
#include <algorithm>
#include <sstream>

#include "ir/error.h"
#include "passes/outer_step.h"
#include "passes/pipeline.h"
#include "passes/strategy.h"
#include "runtime/planner/planner.h"

namespace fsdpc {

namespace {

std::string mesh_text(const Mesh& m) { return std::to_string(m.replicas) + "," + std::to_string(m.shards); }

}  // namespace

// The options `fsdpc train <c.flags()>` compiles with: c.mesh is one
// stage's, with its tp; the rest are PipelineOptions' defaults.
PipelineOptions candidate_pipeline(const AdviseSetup& s, const Candidate& c) {
  PipelineOptions o;
  o.strategy = c.strategy;
  o.mesh = c.mesh;
  o.bucketing = c.unit_buckets;
  o.prefetch = c.prefetch;
  o.precision = s.precision;
  o.remat.mode = c.remat;
  o.sequence_parallel = c.sequence_parallel;
  o.tensor_parallel_plan = s.tensor_parallel_plan;
  o.loss_chunk = s.loss_chunk;
  o.pp = c.pp;
  o.diloco = c.diloco;
  o.int8_gathers = c.int8_gathers;
  o.verify = false;  // the passes are verified by the tests; advise compiles dozens of candidates
  return o;
}

std::string Candidate::flags() const {
  std::string f = "--strategy " + std::string(strategy_name(strategy));
  if (is_hybrid(strategy)) f += " --mesh " + mesh_text(mesh);
  if (strategy != Strategy::no_shard)
    f += std::string(" --bucketing ") + (unit_buckets ? "unit" : "none") + " --prefetch " + std::to_string(prefetch);
  if (remat != RematMode::none) f += " --remat " + remat_name({remat, 0});
  if (mesh.tp > 1) f += " --tp " + std::to_string(mesh.tp);
  if (sequence_parallel) f += " --sequence-parallel";
  if (pp > 1) f += " --pp " + std::to_string(pp) + " --grad-accum " + std::to_string(micro_batches);
  if (keep_gathered) f += " --keep-gathered";
  if (int8_gathers) f += " --gather-dtype int8";
  if (diloco.enabled()) {
    std::ostringstream d;
    d << " --outer-steps " << diloco.outer_steps << " --outer-lr " << diloco.outer_lr << " --outer-momentum "
      << diloco.outer_momentum << " --outer-dtype " << outer_dtype_name(diloco.outer_dtype);
    if (diloco.outer_fragments != 1) d << " --outer-fragments " << diloco.outer_fragments;
    if (diloco.outer_delay != 0) d << " --outer-delay " << diloco.outer_delay;
    if (diloco.outer_mix >= 0) d << " --outer-mix " << diloco.outer_mix;
    f += d.str();
  }
  return f;
}

std::string Candidate::name() const {
  std::string n(strategy_name(strategy));
  if (is_hybrid(strategy)) n += " " + std::to_string(mesh.replicas) + "x" + std::to_string(mesh.shards);
  if (strategy != Strategy::no_shard) n += std::string(unit_buckets ? " unit" : " none") + " p" + std::to_string(prefetch);
  if (remat != RematMode::none) n += " remat:" + remat_name({remat, 0});
  if (mesh.tp > 1) n += " tp" + std::to_string(mesh.tp);
  if (sequence_parallel) n += " sp";
  if (pp > 1) n += " pp" + std::to_string(pp) + " m" + std::to_string(micro_batches);
  if (keep_gathered) n += " kg";
  if (int8_gathers) n += " int8";
  if (diloco.enabled()) {
    n += " diloco:" + std::to_string(diloco.outer_steps) +
         (diloco.outer_dtype == DType::f32 ? "" : ":" + std::string(outer_dtype_name(diloco.outer_dtype)));
    if (diloco.outer_fragments != 1) n += ":F" + std::to_string(diloco.outer_fragments);
    if (diloco.outer_delay != 0) n += ":tau" + std::to_string(diloco.outer_delay);
  }
  return n;
}

std::vector<Candidate> enumerate_candidates(const AdviseSetup& s) {
  std::vector<Candidate> cs;
  // Bucketing and prefetch change an FSDP schedule; no_shard has no gathers
  // and buckets its gradients by --bucket-mb whatever --bucketing says.
  auto add = [&](Strategy strategy, const Mesh& mesh, bool unit, int prefetch, RematMode remat = RematMode::none) {
    Candidate c;
    c.strategy = strategy;
    c.mesh = mesh;
    c.unit_buckets = unit;
    c.prefetch = prefetch;
    c.remat = remat;
    cs.push_back(std::move(c));
  };
  // Activation checkpointing only lowers memory, so its variants ride on the
  // usually fastest knobs (unit buckets, prefetch 1) rather than every pair.
  auto fsdp = [&](Strategy strategy, const Mesh& mesh) {
    for (bool unit : {false, true})
      for (int prefetch : {1, 2}) add(strategy, mesh, unit, prefetch);
    for (RematMode remat : {RematMode::selective, RematMode::block}) add(strategy, mesh, true, 1, remat);
  };
  for (int tp : s.tps) {
    if (tp < 1) fail("--tp must be at least 1, got ", tp);
    if (s.world % tp != 0)
      fail("--tp ", tp, " does not divide --world-size ", s.world, " (tensor-parallel groups of ", tp, " ranks)");
    const int data = s.world / tp;  // the data-parallel ranks the strategies lay out
    auto with_tp = [tp](Mesh m) {
      m.tp = tp;
      return m;
    };
    std::vector<Mesh> meshes;  // for the hybrids
    if (s.mesh) {
      const Mesh m = *s.mesh;
      if (m.world() != data)
        fail("--mesh ", mesh_text(m), " has ", m.world(), " ranks but --world-size is ", s.world,
             (tp > 1 ? " over --tp " + std::to_string(tp) + " (" + std::to_string(data) + " data-parallel ranks)"
                     : std::string()));
      meshes.push_back(with_tp(m));
    } else {
      for (int r = 2; r <= data / 2; ++r)
        if (data % r == 0) meshes.push_back(with_tp(Mesh{r, data / r}));
    }
    fsdp(Strategy::zero3, with_tp(flat_mesh(data)));
    fsdp(Strategy::zero2, with_tp(flat_mesh(data)));
    add(Strategy::no_shard, with_tp(flat_mesh(data)), false, 1);
    for (const Mesh& m : meshes) fsdp(Strategy::hybrid, m);
    for (const Mesh& m : meshes) fsdp(Strategy::hybrid_zero2, m);
    // DiLoCo, when asked: each hybrid with replicas to train apart, on its
    // usually fastest knobs.
    for (const Mesh& m : meshes) {
      if (!s.diloco.enabled() || m.replicas == 1) continue;
      for (Strategy strategy : {Strategy::hybrid, Strategy::hybrid_zero2}) {
        add(strategy, m, true, 1);
        cs.back().diloco = s.diloco;
      }
    }
    // int8 gathers, when asked: each sharded layout on its usually fastest knobs.
    if (s.int8_gathers) {
      auto int8 = [&](Strategy strategy, const Mesh& m) {
        add(strategy, m, true, 1);
        cs.back().int8_gathers = true;
      };
      int8(Strategy::zero3, with_tp(flat_mesh(data)));
      int8(Strategy::zero2, with_tp(flat_mesh(data)));
      for (const Mesh& m : meshes)
        for (Strategy strategy : {Strategy::hybrid, Strategy::hybrid_zero2}) int8(strategy, m);
    }
    // Pipeline stages on the same tp: each stage's data-parallel ranks laid
    // out flat, FSDP with a collective per block (its usually fastest knobs).
    for (int pp : s.pps) {
      if (pp < 1) fail("--pp must be at least 1, got ", pp);
      if (pp == 1) continue;
      if (data % pp != 0)
        fail("--pp ", pp, " does not divide the ", data, " data-parallel ranks of --world-size ", s.world,
             tp > 1 ? " over --tp " + std::to_string(tp) : std::string(), " (the world is pp x a stage's ranks)");
      const Mesh stage = with_tp(flat_mesh(data / pp));
      auto pipelined = [&](Strategy strategy, bool unit, bool keep_gathered = false) {
        add(strategy, stage, unit, 1);
        cs.back().pp = pp;
        cs.back().keep_gathered = keep_gathered;
      };
      // Kept gathered, zero3 and zero2 are one step: sharded between steps,
      // gathered once, reduced once.
      if (data / pp > 1) {
        pipelined(Strategy::zero3, true);
        pipelined(Strategy::zero2, true);
        pipelined(Strategy::zero3, true, true);
      }
      pipelined(Strategy::no_shard, false);
    }
  }
  if (s.sequence_parallel) {
    if (std::none_of(s.tps.begin(), s.tps.end(), [](int t) { return t > 1; }))
      fail("--sequence-parallel splits the sequence across tensor-parallel ranks; give --tp sizes above 1");
    const size_t n = cs.size();
    for (size_t i = 0; i < n; ++i)
      if (cs[i].mesh.tp > 1) {
        Candidate c = cs[i];
        c.sequence_parallel = true;
        cs.push_back(std::move(c));
      }
  }
  if (s.strategies.empty()) return cs;
  std::vector<Strategy> wanted;
  for (const std::string& name : s.strategies) {
    const std::optional<Strategy> strategy = parse_strategy(name);
    if (!strategy) fail("--strategies: unknown strategy '", name, "' (zero3, zero2, no_shard, hybrid, hybrid_zero2)");
    wanted.push_back(*strategy);
  }
  std::erase_if(cs, [&](const Candidate& c) {
    return std::find(wanted.begin(), wanted.end(), c.strategy) == wanted.end();
  });
  if (cs.empty()) fail("--strategies: none of them has a candidate at --world-size ", s.world);
  return cs;
}

}  // namespace fsdpc
