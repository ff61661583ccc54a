// The candidates of fsdpc advise: every strategy with the knobs that change
// its schedule, each compiled as fsdpc dump compiles it (sharding_pipeline),
// planned with the memory plan and timed with the step simulator. Every
// rank of a candidate runs the same traces, so each is compiled once, and
// candidates of one strategy and mesh share the passes before their knobs.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "executors/claim.h"
#include "ir/error.h"
#include "passes/autocast.h"
#include "passes/bucketing.h"
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/elide_identities.h"
#include "passes/del.h"
#include "passes/fsdp.h"
#include "passes/fuse.h"
#include "passes/grad.h"
#include "passes/pipeline.h"
#include "passes/remat.h"
#include "passes/schedule.h"
#include "passes/split.h"
#include "passes/tensor_parallel.h"
#include "passes/wrap.h"
#include "runtime/memory_plan.h"
#include "tools/advise.h"
#include "tools/cli_io.h"
#include "tools/commands.h"

namespace fsdpc::cli {

namespace {

bool is_hybrid_name(const std::string& s) { return s == "hybrid" || s == "hybrid_zero2"; }

std::string mesh_text(const Mesh& m) { return std::to_string(m.replicas) + "," + std::to_string(m.shards); }

// AdamW on the local shards (runtime/optimizer.h): reads parameter, gradient
// and both moments, writes parameter and moments, all f32.
constexpr double kAdamwBytesPerElement = 7 * 4;

PipelineOptions pipeline_options(const AdviseSetup& s, const Candidate& c) {
  ShardingArgs a;
  a.strategy = c.strategy;
  a.mesh = is_hybrid_name(c.strategy) ? mesh_text(c.mesh) : "";
  a.bucketing = c.unit_buckets ? "unit" : "none";
  a.prefetch = c.prefetch;
  a.precision = s.precision;
  a.remat = c.remat;
  a.tp = c.mesh.tp;
  a.sequence_parallel = c.sequence_parallel;
  PipelineOptions o = sharding_pipeline(a, s.world, "--world-size is " + std::to_string(s.world));
  o.verify = false;  // the passes are verified by the tests; advise compiles dozens of candidates
  return o;
}

// The memory plan, the lowered traces and the simulation of one compiled
// candidate (its scheduled forward and backward). They are lowered once, as
// the engine lowers them (the same fusion default as fsdpc train), and both
// the memory plan and the simulation read that: the simulated kernels are
// the ones a run launches, fused regions one kernel each.
void evaluate(const AdviseSetup& s, const PipelineOptions& o, const Trace& forward, const Trace& backward,
              Candidate& c) {
  EngineOptions e;  // the step fsdpc train runs by default: one micro-batch, AdamW
  e.executor = s.executor;
  e.optimizer.kind = OptimizerOptions::Kind::adamw;
  const EngineTraces low{StepTraces{execution_trace(forward, s.executor, e.fusion),
                                    execution_trace(backward, s.executor, e.fusion)},
                         {},
                         {}};
  const MemoryPlan plan = plan_memory_peaks(low, e);
  c.peak_bytes = plan.worst().total_peak;
  c.peak_where = plan.worst().peak_where();
  c.fits = s.cap <= 0 || c.peak_bytes <= s.cap;
  const Trace& fwd = low.sync.forward;
  const Trace& bwd = low.sync.backward;
  double elements = 0;
  for (const Proxy& p : fwd.args)
    if (p.is_param() && p.requires_grad) elements += static_cast<double>(numel(p.type.shape));
  c.optimizer_seconds =
      elements * kAdamwBytesPerElement / (s.hw.memory_bandwidth.value * s.hw.memory_sustained_fraction.value);
  c.sim = simulate_step({&fwd, &bwd}, o.mesh, s.hw, c.optimizer_seconds);
  c.tokens_per_second = static_cast<double>(s.tokens_per_rank) * s.world / c.sim.seconds;
  const double peak = s.precision == "f32" ? s.hw.peak_flops_f32.value : s.hw.peak_flops_bf16.value;
  c.mfu = c.sim.flops / c.sim.seconds / peak;
}

// A candidate's scheduled traces, and the candidate whose predictions they gave.
struct Evaluated {
  Trace forward, backward;
  const Candidate* candidate;
};

void copy_predictions(const Candidate& from, Candidate& to) {
  to.peak_bytes = from.peak_bytes;
  to.peak_where = from.peak_where;
  to.fits = from.fits;
  to.sim = from.sim;
  to.optimizer_seconds = from.optimizer_seconds;
  to.tokens_per_second = from.tokens_per_second;
  to.mfu = from.mfu;
}

// compile()'s last pass. Lowering with fusion drops every del and places
// them again on the fused trace, so there del here would be work thrown away
// (the lowered traces are the same either way).
bool lowering_places_dels(const std::string& executor) {
  return EngineOptions{}.fusion == "auto" && has_fusion_executor(executor);
}

// One strategy on one mesh: its candidates differ only in remat, bucketing
// and prefetch, so they share the passes before those knobs act. compile()
// runs fsdp, autocast, grad, elide, split, dce, cse, bucketing, schedule, del
// for each; here fsdp..elide run once per family, split..cse once per remat
// mode, bucketing once per (remat, bucketing), and only schedule and del
// per candidate: the same passes with the same options in the same order,
// so the traces are compile()'s (advise_test holds every candidate's peak
// and bytes equal to fsdpc dump's, which calls compile()).
void compile_family(const AdviseSetup& s, const std::vector<Candidate*>& family) {
  std::vector<PipelineOptions> opts;
  for (const Candidate* c : family) opts.push_back(pipeline_options(s, *c));
  const PipelineOptions& o = opts.front();
  // compile() runs the tp pass first when the mesh has a tp dimension.
  Trace sharded = o.mesh.tp > 1 ? fsdp(tensor_parallel(s.captured_at(o.mesh.tp),
                                                       TensorParallelOptions{o.mesh.tp, o.sequence_parallel}),
                                       FsdpOptions{o.strategy, o.mesh})
                                : fsdp(s.captured, FsdpOptions{o.strategy, o.mesh});
  const std::vector<Unit> units = wrap_units(sharded, o.wrap);
  const std::vector<std::string> grad_params = gradient_params(sharded);
  if (o.precision != DType::f32) sharded = autocast(sharded, o.precision);
  Trace joint = grad(sharded, GradOptions{o.sync_grads, o.accumulate_grads, {}});
  sharded = Trace{};
  // At world size 1 the gathers, reductions and 1/N scaling copy without
  // changing a value, and compile() elides them (it keeps the result only
  // when something went, as here).
  if (Trace elided = elide_identities(joint); elided.bsyms.size() != joint.bsyms.size()) joint = std::move(elided);
  const bool regather = regathers_in_backward(o.strategy);
  const bool dels_later = lowering_places_dels(s.executor);
  auto place_dels = [&](Trace&& t) { return dels_later ? std::move(t) : insert_dels(t); };
  std::vector<bool> done(family.size(), false);
  for (size_t i = 0; i < family.size(); ++i) {
    if (done[i]) continue;
    FSDPC_CHECK(opts[i].remat.mode != RematMode::auto_cut) << "advise: remat auto is not a candidate";
    const RematPlan remat{opts[i].remat.mode, units, SIZE_MAX, regather};
    const std::unordered_set<std::string> recompute = remat_recomputable(joint, remat);
    SplitResult fb = split(joint, SplitOptions{regather, &recompute});
    const Trace fwd = cse(dce(fb.forward)), bwd = cse(dce(fb.backward));
    fb = SplitResult{};
    for (size_t j = i; j < family.size(); ++j) {
      if (done[j] || opts[j].remat.mode != opts[i].remat.mode) continue;
      const BucketingOptions bucket{o.strategy, units, opts[j].bucketing, o.bucket_mb, grad_params};
      const Trace bf = bucketing(fwd, bucket);
      Trace bb = bucketing(bwd, bucket);
      sync_saved_types(bf, bb);
      std::vector<Evaluated> evaluated;
      for (size_t k = j; k < family.size(); ++k) {
        if (done[k] || opts[k].remat.mode != opts[i].remat.mode || opts[k].bucketing != opts[j].bucketing) continue;
        const ScheduleOptions sched{opts[k].prefetch, opts[k].max_inflight, units};
        Trace sf = place_dels(schedule(bf, sched)), sb = place_dels(schedule(bb, sched));
        // A knob that changes nothing gives the traces of an earlier
        // candidate, and so its predictions: prefetch 2 under max_inflight 2
        // (two all_gathers in flight, as prefetch 1 has) is a third of them.
        auto same = std::find_if(evaluated.begin(), evaluated.end(),
                                 [&](const Evaluated& e) { return e.forward == sf && e.backward == sb; });
        if (same != evaluated.end()) {
          copy_predictions(*same->candidate, *family[k]);
        } else {
          evaluate(s, opts[k], sf, sb, *family[k]);
          evaluated.push_back({std::move(sf), std::move(sb), family[k]});
        }
        done[k] = true;
      }
    }
  }
}

}  // namespace

std::string Candidate::flags() const {
  std::string f = "--strategy " + strategy;
  if (is_hybrid_name(strategy)) f += " --mesh " + mesh_text(mesh);
  if (strategy != "no_shard") f += std::string(" --bucketing ") + (unit_buckets ? "unit" : "none") +
                                   " --prefetch " + std::to_string(prefetch);
  if (remat != "none") f += " --remat " + remat;
  if (mesh.tp > 1) f += " --tp " + std::to_string(mesh.tp);
  if (sequence_parallel) f += " --sequence-parallel";
  return f;
}

std::string Candidate::name() const {
  std::string n = strategy;
  if (is_hybrid_name(strategy)) n += " " + std::to_string(mesh.replicas) + "x" + std::to_string(mesh.shards);
  if (strategy != "no_shard") n += std::string(unit_buckets ? " unit" : " none") + " p" + std::to_string(prefetch);
  if (remat != "none") n += " remat:" + remat;
  if (mesh.tp > 1) n += " tp" + std::to_string(mesh.tp);
  if (sequence_parallel) n += " sp";
  return n;
}

std::vector<Candidate> enumerate_candidates(const AdviseSetup& s) {
  std::vector<Candidate> cs;
  // Bucketing and prefetch change an FSDP schedule; no_shard has no gathers
  // and buckets its gradients by --bucket-mb whatever --bucketing says.
  auto add = [&](const std::string& strategy, const Mesh& mesh, bool unit, int prefetch, const char* remat = "none") {
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
  auto fsdp = [&](const std::string& strategy, const Mesh& mesh) {
    for (bool unit : {false, true})
      for (int prefetch : {1, 2}) add(strategy, mesh, unit, prefetch);
    for (const char* remat : {"selective", "block"}) add(strategy, mesh, true, 1, remat);
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
    if (!s.mesh.empty()) {
      const Mesh m = parse_mesh(s.mesh);
      if (m.world() != data)
        fail("--mesh ", s.mesh, " has ", m.world(), " ranks but --world-size is ", s.world,
             (tp > 1 ? " over --tp " + std::to_string(tp) + " (" + std::to_string(data) + " data-parallel ranks)"
                     : std::string()));
      meshes.push_back(with_tp(m));
    } else {
      for (int r = 2; r <= data / 2; ++r)
        if (data % r == 0) meshes.push_back(with_tp(Mesh{r, data / r}));
    }
    fsdp("zero3", with_tp(flat_mesh(data)));
    fsdp("zero2", with_tp(flat_mesh(data)));
    add("no_shard", with_tp(flat_mesh(data)), false, 1);
    for (const Mesh& m : meshes) fsdp("hybrid", m);
    for (const Mesh& m : meshes) fsdp("hybrid_zero2", m);
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
  for (const std::string& name : s.strategies)
    if (name != "zero3" && name != "zero2" && name != "no_shard" && !is_hybrid_name(name))
      fail("--strategies: unknown strategy '", name, "' (zero3, zero2, no_shard, hybrid, hybrid_zero2)");
  std::erase_if(cs, [&](const Candidate& c) {
    return std::find(s.strategies.begin(), s.strategies.end(), c.strategy) == s.strategies.end();
  });
  if (cs.empty()) fail("--strategies: none of them has a candidate at --world-size ", s.world);
  return cs;
}

void evaluate_candidates(const AdviseSetup& s, std::vector<Candidate>& cs) {
  // Families (a strategy on a mesh) share their passes' prefix; they share
  // nothing mutable with each other (the passes copy traces), so each
  // compiles on a thread of its own; the first error is the one reported.
  std::vector<std::vector<Candidate*>> families;
  for (Candidate& c : cs) {
    auto same = [&](const std::vector<Candidate*>& f) {
      return f.front()->strategy == c.strategy && f.front()->mesh.replicas == c.mesh.replicas &&
             f.front()->mesh.shards == c.mesh.shards && f.front()->mesh.tp == c.mesh.tp &&
             f.front()->sequence_parallel == c.sequence_parallel;
    };
    auto it = std::find_if(families.begin(), families.end(), same);
    if (it == families.end()) families.push_back({&c});
    else it->push_back(&c);
  }
  // The largest families first, so the last one to start is a short one.
  std::stable_sort(families.begin(), families.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  auto work = [&] {
    for (size_t i; !failed && (i = next++) < families.size();) {
      try {
        compile_family(s, families[i]);
      } catch (...) {
        if (!failed.exchange(true)) error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::min<int>(s.threads, static_cast<int>(families.size())); ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

void rank_candidates(std::vector<Candidate>& cs) {
  std::stable_sort(cs.begin(), cs.end(), [](const Candidate& a, const Candidate& b) {
    if (a.fits != b.fits) return a.fits;
    if (a.sim.seconds != b.sim.seconds) return a.sim.seconds < b.sim.seconds;
    return a.peak_bytes < b.peak_bytes;
  });
}

std::string winner_reason(const std::vector<Candidate>& ranked, int64_t cap) {
  if (ranked.empty()) return "no candidate";
  const Candidate& w = ranked.front();
  char buf[512];
  if (!w.fits) {
    const auto smallest = std::min_element(ranked.begin(), ranked.end(), [](const Candidate& a, const Candidate& b) {
      return a.peak_bytes < b.peak_bytes;
    });
    std::snprintf(buf, sizeof buf, "nothing fits the %s cap: the smallest peak is %s (%s), %s over it", format_bytes(cap).c_str(),
                  format_bytes(smallest->peak_bytes).c_str(), smallest->name().c_str(),
                  format_bytes(smallest->peak_bytes - cap).c_str());
    return buf;
  }
  double comm = 0;
  for (const CommStream& st : w.sim.streams) comm += st.busy;
  const double hidden = comm > 0 ? 100.0 * (1 - std::min(1.0, w.sim.blocked / comm)) : 100.0;
  size_t fitting = 0;
  for (const Candidate& c : ranked) fitting += c.fits;
  // Candidates predicted as fast (prefetch that does not change a saturated
  // or already hidden schedule) are named, then the first slower one.
  std::string ties, next;
  size_t i = 1;
  for (; i < ranked.size() && ranked[i].fits && ranked[i].sim.seconds <= w.sim.seconds * (1 + 1e-9); ++i)
    ties += (ties.empty() ? "" : ", ") + ranked[i].name();
  if (!ties.empty()) ties = "; as fast: " + ties + " (ties go to the smaller peak, then to fewer knobs)";
  if (i < ranked.size() && ranked[i].fits) {
    char n[200];
    std::snprintf(n, sizeof n, "; the next, %s, is %.1f%% slower", ranked[i].name().c_str(),
                  100.0 * (ranked[i].sim.seconds / w.sim.seconds - 1));
    next = n;
  }
  const std::string within = cap > 0 ? " " + format_bytes(cap) : "";
  std::snprintf(buf, sizeof buf,
                "%s is the fastest of the %zu candidates that fit%s: %.1f%% of its %.3f ms of communication is hidden "
                "behind compute (%.3f ms exposed), peak %s per rank",
                w.name().c_str(), fitting, within.c_str(), hidden, comm * 1e3, w.sim.blocked * 1e3,
                format_bytes(w.peak_bytes).c_str());
  return buf + ties + next;
}

}  // namespace fsdpc::cli
