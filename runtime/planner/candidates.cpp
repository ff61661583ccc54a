// The candidates of fsdpc advise (runtime/planner/candidate_list.cpp lists
// them), each compiled as fsdpc dump compiles it (sharding_pipeline),
// planned with the memory plan and timed with the step simulator. Every
// rank of a candidate runs the same traces, so each is compiled once, and
// candidates of one strategy and mesh share the passes before their knobs.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <functional>
#include <exception>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "executors/claim.h"
#include "ir/error.h"
#include "passes/fuse.h"
#include "passes/outer_step.h"
#include "passes/pipeline.h"
#include "passes/strategy.h"
#include "runtime/step_traces.h"
#include "runtime/planner/memory_plan.h"
#include "runtime/planner/pipeline_timing.h"
#include "runtime/planner/planner.h"

namespace fsdpc {

namespace {

// AdamW on the local shards (runtime/optimizer.h): reads parameter, gradient
// and both moments, writes parameter and moments, all f32.
constexpr double kAdamwBytesPerElement = 7 * 4;

// The AdamW update of the local shards of `forward`'s parameters, at the
// profile's memory bandwidth.
double optimizer_seconds(const AdviseSetup& s, const Trace& forward) {
  double elements = 0;
  for (const Proxy& p : forward.args)
    if (p.is_param() && p.requires_grad) elements += static_cast<double>(numel(p.type.shape));
  return elements * kAdamwBytesPerElement / (s.hw.memory_bandwidth.value * s.hw.memory_sustained_fraction.value);
}

// Tokens/s of the whole world and MFU, from the candidate's simulated step.
void set_rates(const AdviseSetup& s, Candidate& c) {
  c.tokens_per_second = static_cast<double>(s.tokens_per_rank) * s.world / c.sim.seconds;
  const double peak = s.precision == DType::f32 ? s.hw.peak_flops_f32.value : s.hw.peak_flops_bf16.value;
  c.mfu = c.sim.flops / c.sim.seconds / peak;
}


// The inter-node bandwidth from which `step` (a candidate's step seconds
// on a profile) keeps 90% of its speed on an unlimited link: every
// inter-node bandwidth figure scaled together, bisected on a log scale
// between a millionth and a million times the profile's.
double link_for_90(const HardwareProfile& hw, const std::function<double(const HardwareProfile&)>& step) {
  auto at = [&](double k) {
    HardwareProfile h = hw;
    for (Figure* f : {&h.inter_node.bandwidth, &h.inter_node.reduce_scatter_bandwidth, &h.inter_node.all_reduce_bandwidth})
      f->value *= k;
    return step(h);
  };
  double lo = -6, hi = 6;  // log10 of the scale
  const double enough = at(std::pow(10.0, hi)) / 0.9;
  if (at(std::pow(10.0, lo)) <= enough) return 0;
  for (int i = 0; i < 40; ++i) {
    const double mid = (lo + hi) / 2;
    (at(std::pow(10.0, mid)) <= enough ? hi : lo) = mid;
  }
  return std::pow(10.0, hi) * hw.inter_node.bandwidth.value;
}

// One round's outer work: each fragment's traces simulated in order (its
// collectives in flight from the issue to the land's waits), the fragments
// one after another. With a delay the replicas train TAU steps of
// `inner_seconds` while an exchange is in flight: that much of each wait is
// hidden. Without fragments or a delay, DiLoCo's one outer step.
StepSimulation simulate_outer(const OuterStep& outer, const Mesh& mesh, const HardwareProfile& hw,
                              double inner_seconds) {
  StepSimulation total;
  for (const OuterFragment& f : outer.fragments) {
    const StepSimulation one = simulate_step(f.traces(), mesh, hw, 0);
    const double hidden = std::min(one.blocked, outer.delay * inner_seconds);
    total.seconds += one.seconds - hidden;
    total.blocked += one.blocked - hidden;
    total.compute += one.compute;
    for (const CommStream& st : one.streams) {
      auto it = std::find_if(total.streams.begin(), total.streams.end(),
                             [&](const CommStream& x) { return x.group == st.group; });
      if (it == total.streams.end()) it = total.streams.insert(total.streams.end(), CommStream{st.group, st.size, st.inter_node});
      it->count += st.count;
      it->bytes += st.bytes;
      it->busy += st.busy;
    }
  }
  return total;
}

// The memory plan, the lowered traces and the simulation of one compiled
// candidate (its scheduled forward and backward). They are lowered once, as
// the engine lowers them (the same fusion default as fsdpc train), and both
// the memory plan and the simulation read that: the simulated kernels are
// the ones a run launches, fused regions one kernel each.
void evaluate(const AdviseSetup& s, const PipelineOptions& o, const Trace& forward, const Trace& backward,
              Candidate& c) {
  EngineOptions e;  // the step fsdpc train runs by default: one micro-batch, AdamW
  e.target = s.target;
  e.optimizer.kind = OptimizerOptions::Kind::adamw;
  EngineTraces low{StepTraces{execution_trace(forward, s.target, e.fusion),
                              execution_trace(backward, s.target, e.fusion)},
                   {},
                   {}};
  // DiLoCo's outer trace reads the parameters' shards, which the forward's
  // arguments are.
  if (o.diloco.enabled())
    low.outer = lower_outer_step(
        OuterStep{outer_fragments(forward, o.diloco, o.mesh, o.wrap), o.diloco.outer_steps, o.diloco.outer_delay},
        s.target, e.fusion);
  const MemoryPlan plan = plan_memory_peaks(low, e);
  c.peak_bytes = plan.worst().total_peak;
  c.peak_where = plan.worst().peak_where();
  c.fits = s.cap <= 0 || c.peak_bytes <= s.cap;
  const Trace& fwd = low.sync.forward;
  const Trace& bwd = low.sync.backward;
  if (s.unmeasured)
    for (const Trace* t : {&fwd, &bwd}) s.unmeasured->collect(*t, s.hw);
  c.optimizer_seconds = optimizer_seconds(s, fwd);
  c.sim = simulate_step({&fwd, &bwd}, o.mesh, s.hw, c.optimizer_seconds);
  if (low.outer) {
    // One round is H inner steps and one outer step: priced per step, its
    // time and its streams' traffic spread over the round's steps (the
    // outer step blocks the compute stream while it runs).
    const StepSimulation outer = simulate_outer(*low.outer, o.mesh, s.hw, c.sim.seconds);
    const double h = o.diloco.outer_steps;
    c.outer_seconds = outer.seconds;
    c.sim.seconds += outer.seconds / h;
    c.sim.blocked += outer.blocked / h;
    for (const CommStream& st : outer.streams) {
      auto it = std::find_if(c.sim.streams.begin(), c.sim.streams.end(),
                             [&](const CommStream& x) { return x.group == st.group; });
      if (it == c.sim.streams.end()) it = c.sim.streams.insert(c.sim.streams.end(), CommStream{st.group, st.size, st.inter_node});
      it->count += st.count;  // counted once: a collective does not divide
      it->bytes += st.bytes / h;
      it->busy += st.busy / h;
    }
  }
  // Slow links are DiLoCo's and int8 gathers' question: every candidate's
  // answer that they could change, beside it.
  if ((s.diloco.enabled() && is_hybrid(c.strategy)) || (s.int8_gathers && c.strategy != Strategy::no_shard)) {
    c.link_for_90 = link_for_90(s.hw, [&](const HardwareProfile& h) {
      double t = simulate_step({&fwd, &bwd}, o.mesh, h, c.optimizer_seconds).seconds;
      if (low.outer) t += simulate_outer(*low.outer, o.mesh, h, t).seconds / o.diloco.outer_steps;
      return t;
    });
  }
  set_rates(s, c);
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
  to.outer_seconds = from.outer_seconds;
  to.tokens_per_second = from.tokens_per_second;
  to.mfu = from.mfu;
}

// A pipeline candidate: every stage compiled as fsdpc dump compiles it,
// each stage's memory planned under 1F1B (the candidate's peak is the
// fullest stage's), each stage's micro-batch forward and backward simulated
// on their own, and the step replayed over the stages' orders
// (runtime/planner/pipeline_timing.h) with each transfer priced on the link group
// pp crosses. Reported per rank: the stage that sends the most (its
// streams, each a step's, beside pp's), the step's matmul FLOPs averaged
// over the stages, and as exposed the most any stage waits (its bubble and
// its waits on collectives). What it leaves out: the host all_reduce of a
// tied embedding's gradient between the first and last stage.
void evaluate_pipeline(const AdviseSetup& s, Candidate& c) {
  const PipelineOptions o = candidate_pipeline(s, c);
  const Trace& captured = s.pp_captured.at({c.mesh.tp, c.pp});
  const std::vector<std::vector<Stage>> compiled = compile_pipeline(captured, o);
  // --keep-gathered: each stage's micro-batches on whole parameters, between
  // its gather and its reduce.
  const std::vector<EngineTraces> gathered =
      c.keep_gathered ? step_traces(captured, o, compiled, MicroBatchOptions{c.micro_batches, false, true})
                      : std::vector<EngineTraces>{};
  EngineOptions e;
  e.target = s.target;
  e.optimizer.kind = OptimizerOptions::Kind::adamw;
  e.mesh = o.mesh;
  e.mesh.pp = c.pp;
  e.grad_accum = c.micro_batches;
  e.pp_schedule = PipelineSchedule::one_f_one_b;
  e.keep_gathered = c.keep_gathered;
  const int m = c.micro_batches, per_node = static_cast<int>(s.hw.gpus_per_node.value);
  std::vector<PipelineStageTimes> times;
  double transfer = 0, flops = 0, optimizer = 0, most_sent = -1, most_waited = 0, compute = 0, matmul = 0, comm_host = 0;
  std::vector<double> stage_blocked;
  c.peak_bytes = -1;
  for (size_t i = 0; i < compiled.size(); ++i) {
    auto lowered = [&](const Trace& t) { return execution_trace(t, s.target, e.fusion); };
    EngineTraces low{StepTraces{lowered(compiled[i].back().traces.at(0)), lowered(compiled[i].back().traces.at(1))},
                     {},
                     {}};
    if (c.keep_gathered) {
      const GatheredStep& g = *gathered.at(i).gathered;
      low.gathered = GatheredStep{lowered(g.gather), lowered(g.reduce), {lowered(g.micro.forward), lowered(g.micro.backward)}};
    }
    const MemoryPlan plan = plan_memory_peaks(low, e, static_cast<int>(i));
    if (plan.worst().total_peak > c.peak_bytes) {
      c.peak_bytes = plan.worst().total_peak;
      c.peak_where = "stage " + std::to_string(i) + ", " + plan.worst().peak_where();
    }
    const StepTraces& micro = c.keep_gathered ? low.gathered->micro : low.sync;
    if (s.unmeasured)
      for (const Trace* t : {&micro.forward, &micro.backward}) s.unmeasured->collect(*t, s.hw);
    const StepSimulation fwd = simulate_step({&micro.forward}, o.mesh, s.hw);
    const StepSimulation bwd = simulate_step({&micro.backward}, o.mesh, s.hw);
    StepSimulation before, after;  // the gather and reduce, once a step
    if (c.keep_gathered) {
      before = simulate_step({&low.gathered->gather}, o.mesh, s.hw);
      after = simulate_step({&low.gathered->reduce}, o.mesh, s.hw);
    }
    times.push_back({fwd.seconds, bwd.seconds, before.seconds, after.seconds});
    flops += m * (fwd.flops + bwd.flops);
    if (m * (fwd.compute + bwd.compute) + before.compute + after.compute > compute) {
      compute = m * (fwd.compute + bwd.compute) + before.compute + after.compute;
      matmul = m * (fwd.matmul + bwd.matmul);
      comm_host = m * (fwd.comm_host + bwd.comm_host) + before.comm_host + after.comm_host;
    }
    optimizer = std::max(optimizer, optimizer_seconds(s, low.sync.forward));
    stage_blocked.push_back(m * (fwd.blocked + bwd.blocked) + before.blocked + after.blocked);
    // The activation a stage sends forward, and its gradient back, are of one size.
    double payload = 0;
    int sends = 0;
    for (const Trace* t : {&micro.forward, &micro.backward})
      for (const BoundSymbol& b : t->bsyms)
        if (b.op == OpId::Send) {
          const TensorType& sent = b.outputs.at(0).type;
          payload = static_cast<double>(numel(sent.shape) * dtype_size(sent.dtype));
          ++sends;
        }
    Mesh full = o.mesh;
    full.pp = c.pp;
    const bool inter = group_crosses_nodes(full, "pp", per_node);
    const LinkProfile& link = inter ? s.hw.inter_node : s.hw.intra_node;
    if (payload > 0) transfer = std::max(transfer, link.latency.value + payload / link.effective_bandwidth());
    // The step's streams of this stage: each collective M times, and pp.
    std::vector<CommStream> streams;
    for (const StepSimulation* sim : std::initializer_list<const StepSimulation*>{&before, &fwd, &bwd, &after})
      for (const CommStream& st : sim->streams) {
        const int times_a_step = sim == &fwd || sim == &bwd ? m : 1;
        auto it = std::find_if(streams.begin(), streams.end(), [&](const CommStream& x) { return x.group == st.group; });
        if (it == streams.end()) it = streams.insert(streams.end(), CommStream{st.group, st.size, st.inter_node, 0, 0, 0});
        it->count += times_a_step * st.count;
        it->bytes += times_a_step * st.bytes;
        it->busy += times_a_step * st.busy;
      }
    const double pp_bytes = static_cast<double>(m) * sends * payload;
    streams.push_back({"pp", c.pp, inter, static_cast<int64_t>(m) * sends, pp_bytes,
                       m * sends * (link.latency.value + payload / link.effective_bandwidth())});
    double sent = 0;
    for (const CommStream& st : streams) sent += st.bytes;
    if (sent > most_sent) {
      most_sent = sent;
      c.sim.streams = std::move(streams);
    }
  }
  const PipelineTiming timing = pipeline_timing(times, transfer, e.pp_schedule, m);
  for (size_t i = 0; i < times.size(); ++i) most_waited = std::max(most_waited, timing.idle[i] + stage_blocked[i]);
  c.fits = s.cap <= 0 || c.peak_bytes <= s.cap;
  c.optimizer_seconds = optimizer;
  c.sim.seconds = timing.seconds + optimizer;
  c.sim.compute = compute + optimizer;  // the busiest stage's
  c.sim.matmul = matmul;
  c.sim.comm_host = comm_host;
  c.sim.blocked = most_waited;
  c.sim.flops = flops / static_cast<double>(compiled.size());
  set_rates(s, c);
}

// compile()'s last pass. Lowering with fusion drops every del and places
// them again on the fused trace, so there del here would be work thrown away
// (the lowered traces are the same either way).
bool lowering_places_dels(Target target) {
  return EngineOptions{}.fusion == FusionMode::automatic && has_fusion_executor(target);
}

// One strategy on one mesh: its candidates differ only in remat, bucketing
// and prefetch, so they share the passes before those knobs act, through
// compile()'s own parts (passes/pipeline.h): the joint trace once per
// family, a split once per remat mode, a bucketing once per (remat,
// bucketing), and only schedule and del per candidate. The traces are
// compile()'s (advise_test holds every candidate's peak and bytes equal to
// fsdpc dump's).
void compile_family(const AdviseSetup& s, const std::vector<Candidate*>& family) {
  std::vector<PipelineOptions> opts;
  for (const Candidate* c : family) opts.push_back(candidate_pipeline(s, *c));
  const JointTrace joint = compile_joint(s.captured_at(opts.front().mesh.tp), opts.front(), nullptr);
  const bool dels_later = lowering_places_dels(s.target);
  std::vector<bool> done(family.size(), false);
  for (size_t i = 0; i < family.size(); ++i) {
    if (done[i]) continue;
    FSDPC_CHECK(opts[i].remat.mode != RematMode::auto_cut) << "advise: remat auto is not a candidate";
    const SplitResult split = compile_split(joint, opts[i], nullptr);
    for (size_t j = i; j < family.size(); ++j) {
      if (done[j] || opts[j].remat.mode != opts[i].remat.mode) continue;
      const SplitResult bucketed = compile_bucketing(split, joint, opts[j], nullptr);
      std::vector<Evaluated> evaluated;
      for (size_t k = j; k < family.size(); ++k) {
        if (done[k] || opts[k].remat.mode != opts[i].remat.mode || opts[k].bucketing != opts[j].bucketing ||
            opts[k].int8_gathers != opts[j].int8_gathers)  // quantize_gathers runs in compile_bucketing
          continue;
        SplitResult scheduled = compile_schedule(bucketed, joint, opts[k], nullptr, !dels_later);
        // A knob that changes nothing gives the traces of an earlier
        // candidate, and so its predictions: prefetch 2 under max_inflight 2
        // (two all_gathers in flight, as prefetch 1 has) is a third of them.
        auto same = std::find_if(evaluated.begin(), evaluated.end(), [&](const Evaluated& e) {
          return e.forward == scheduled.forward && e.backward == scheduled.backward;
        });
        if (same != evaluated.end()) {
          copy_predictions(*same->candidate, *family[k]);
        } else {
          evaluate(s, opts[k], scheduled.forward, scheduled.backward, *family[k]);
          evaluated.push_back({std::move(scheduled.forward), std::move(scheduled.backward), family[k]});
        }
        done[k] = true;
      }
    }
  }
}

}  // namespace

void evaluate_candidates(const AdviseSetup& s, std::vector<Candidate>& cs) {
  // Families (a strategy on a mesh) share their passes' prefix; they share
  // nothing mutable with each other (the passes copy traces), so each
  // compiles on a thread of its own; the first error is the one reported.
  std::vector<std::vector<Candidate*>> families;
  for (Candidate& c : cs) {
    auto same = [&](const std::vector<Candidate*>& f) {
      return f.front()->strategy == c.strategy && f.front()->mesh.replicas == c.mesh.replicas &&
             f.front()->mesh.shards == c.mesh.shards && f.front()->mesh.tp == c.mesh.tp &&
             f.front()->sequence_parallel == c.sequence_parallel && f.front()->pp == c.pp &&
             f.front()->diloco.enabled() == c.diloco.enabled();
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
        if (families[i].front()->pp > 1) {
          for (Candidate* c : families[i]) evaluate_pipeline(s, *c);
        } else {
          compile_family(s, families[i]);
        }
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

void prepare_pipelines(AdviseSetup& s, std::vector<Candidate>& cs, const std::function<Trace(int64_t)>& capture) {
  for (Candidate& c : cs) {
    if (c.pp == 1) continue;
    const std::pair<int, int> key{c.mesh.tp, c.pp};
    if (!s.pp_micro_batches.count(key)) {
      if (s.captured.args.empty() || s.captured.args[0].type.shape.empty())
        fail("--pp: the model's first input has no batch dimension to split into micro-batches");
      // A stage's data-parallel rank trains on tp * pp ranks' rows.
      const int64_t rows = s.captured.args[0].type.shape[0] * c.mesh.tp * c.pp;
      int64_t m = s.micro_batches;
      if (m > 0 && rows % m != 0)
        fail("--micro-batches ", m, " does not divide the ", rows, " rows a data-parallel rank of a --pp ", c.pp,
             " stage trains on (", s.captured.args[0].type.shape[0], " a rank x ", c.pp, " stages",
             c.mesh.tp > 1 ? " x tp " + std::to_string(c.mesh.tp) : std::string(), ")");
      if (m <= 0)  // 1F1B's bubble is (P-1)/(M+P-1): 4P micro-batches keep it near a fifth
        for (m = std::min<int64_t>(rows, 4 * c.pp); rows % m != 0; --m) {
        }
      s.pp_micro_batches[key] = static_cast<int>(m);
      s.pp_captured.emplace(key, capture(rows / m));
    }
    c.micro_batches = s.pp_micro_batches.at(key);
  }
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

}  // namespace fsdpc
