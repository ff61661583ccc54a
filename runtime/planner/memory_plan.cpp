// plan_memory(): the engine's step replayed on a model of the allocator.
// Each action below names the engine code it mirrors; when that code changes
// how long a buffer lives, this file changes with it (memory_plan_test holds
// the two together for every strategy).
#include "runtime/planner/memory_plan.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "executors/claim.h"
#include "executors/device_backend.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "passes/grad.h"
#include "passes/head_grad_forward.h"
#include "runtime/planner/allocator_model.h"
#include "runtime/planner/step_replay.h"

namespace fsdpc {

using planner_detail::AllocatorModel;
using planner_detail::bytes_of;
using planner_detail::Held;
using planner_detail::one_line;
using planner_detail::ParamBlock;
using planner_detail::RankState;
using planner_detail::StepReplay;

namespace {

// Engine::forward_args: inputs (and a cotangent) copied in (activations),
// parameters by reference.
std::vector<int> forward_args(StepReplay& r, const Trace& forward, const RankState& s) {
  std::vector<int> args;
  size_t p = 0;
  for (const Proxy& a : forward.args) {
    if (a.is_param() && !s.gathered.empty()) {
      const int id = s.gathered.at(a.name);
      r.mem().hold(id);
      args.push_back(id);
    } else if (a.is_param()) {
      FSDPC_CHECK(p < s.params.size() && s.params[p].proxy == a.name) << "memory plan: parameter order";
      r.mem().hold(s.params[p++].id);
      args.push_back(s.params[p - 1].id);
    } else {
      args.push_back(r.mem().allocate(bytes_of(a.type), MemCategory::activations));
    }
  }
  r.point(0, "inputs copied in");
  return args;
}

// Engine::backward_args: the saved values handed over, then acc_* (one more
// reference each) and the cotangent (copied in) by name.
std::vector<int> backward_args(StepReplay& r, const Trace& backward, std::vector<int> bargs, const RankState& s,
                               const std::vector<Held>& acc) {
  for (size_t i = bargs.size(); i < backward.args.size(); ++i) {
    const std::string& name = backward.args[i].name;
    if (name == kCotangentArg) {
      bargs.push_back(r.mem().allocate(bytes_of(backward.args[i].type), MemCategory::activations));
      r.point(0, "cotangent copied in");
      continue;
    }
    size_t g = 0;
    bool found = false;
    for (const ParamBlock& p : s.params) {
      if (!p.requires_grad) continue;
      if ("acc_" + p.proxy == name) {
        r.mem().hold(acc.at(g).id);
        bargs.push_back(acc.at(g).id);
        found = true;
        break;
      }
      ++g;
    }
    FSDPC_CHECK(found) << "memory plan: no accumulated gradient for " << name;
  }
  return bargs;
}

// Engine::micro_step: returns the backward's gradients, one reference each.
std::vector<Held> micro_step(StepReplay& r, const StepTraces& t, const RankState& s, const std::vector<Held>& acc,
                             const std::string& label) {
  AllocatorModel& mem = r.mem();
  r.phase("forward " + label);
  std::vector<Held> outs = r.run(t.forward, forward_args(r, t.forward, s));
  const size_t n_out = t.forward.returns.items.at(0).items.size();
  const int loss = outs.at(0).id;
  mem.hold(loss);
  std::vector<int> bargs;
  for (size_t i = n_out; i < outs.size(); ++i) {
    mem.hold(outs[i].id);
    bargs.push_back(outs[i].id);
  }
  for (const Held& h : outs) mem.drop(h.id);
  r.phase("backward " + label);
  bargs = backward_args(r, t.backward, std::move(bargs), s, acc);
  std::vector<Held> grads = r.run(t.backward, bargs);
  for (const Held& g : grads) mem.recategorize(g.id, MemCategory::gradients);
  r.point(0, "backward outputs kept as gradients");
  mem.drop(loss);
  r.point(0, "loss read and freed");
  return grads;
}

// Engine::add_into: the first gradients become the sum; later ones are
// added and freed.
void add_into(StepReplay& r, std::vector<Held>& sum, std::vector<Held>& grads) {
  if (sum.empty()) {
    sum = std::move(grads);
    grads.clear();
    return;
  }
  for (const Held& g : grads) r.mem().drop(g.id);
  grads.clear();
  r.point(0, "gradients added into the accumulated ones and freed");
}

// Engine::pipeline_micro_batches (runtime/engine_pipeline.cpp): the stage's
// forwards and backwards in the schedule's order, each micro-batch's saved
// values held from its forward to its backward, so 1F1B's peak holds at
// most P - stage of them and GPipe's all.
void pipeline_micro_batches(StepReplay& r, const EngineTraces& traces, const EngineOptions& o, const RankState& s,
                            int stage, std::vector<Held>& sum) {
  AllocatorModel& mem = r.mem();
  const int k = o.grad_accum, stages = o.mesh.pp;
  const bool no_sync = o.no_sync && k > 1, gathered = traces.gathered.has_value();
  std::map<int, std::vector<int>> saved;
  std::vector<Held> local;
  for (const PipelineOp& op : pipeline_order(o.pp_schedule, stage, stages, k)) {
    const int m = op.micro_batch;
    const StepTraces& t = gathered ? traces.gathered->micro
                          : !no_sync ? traces.sync
                                     : (m + 1 < k ? *traces.no_sync : *traces.accumulate);
    const std::string label = std::to_string(m + 1) + "/" + std::to_string(k) +
                              (gathered ? " gathered" : !no_sync ? "" : m + 1 < k ? " no_sync" : " accumulate");
    if (op.forward) {
      r.phase("forward " + label);
      std::vector<Held> outs = r.run(t.forward, forward_args(r, t.forward, s));
      const size_t n_out = t.forward.returns.items.at(0).items.size();
      for (size_t i = n_out; i < outs.size(); ++i) {
        mem.hold(outs[i].id);
        saved[m].push_back(outs[i].id);
      }
      for (const Held& h : outs) mem.drop(h.id);
      r.point(0, "outputs read; saved values kept until the backward");
      continue;
    }
    r.phase("backward " + label);
    std::vector<int> bargs = backward_args(r, t.backward, std::move(saved.at(m)), s, local);
    saved.erase(m);
    std::vector<Held> grads = r.run(t.backward, bargs);
    if (stage > 0) {  // the input's gradient, sent to the stage before
      mem.drop(grads.back().id);
      grads.pop_back();
    }
    for (const Held& g : grads) mem.recategorize(g.id, MemCategory::gradients);
    r.point(0, "backward outputs kept as gradients");
    if (!no_sync || gathered) {
      add_into(r, sum, grads);
    } else if (m + 1 < k) {
      add_into(r, local, grads);
    } else {
      sum = std::move(grads);
      for (const Held& h : local) mem.drop(h.id);
      local.clear();
      r.point(0, "no_sync gradients freed");
    }
  }
}

// Engine::gather_parameters (runtime/engine_gathered.cpp): the shards
// handed to the gather trace, its full parameters kept by name.
void gather_parameters(StepReplay& r, const Trace& gather, RankState& s) {
  r.phase("gather");
  std::vector<int> args;
  for (const Proxy& a : gather.args) {
    auto it = std::find_if(s.params.begin(), s.params.end(), [&](const ParamBlock& p) { return p.proxy == a.name; });
    FSDPC_CHECK(it != s.params.end()) << "memory plan: gather reads no parameter " << a.name;
    r.mem().hold(it->id);
    args.push_back(it->id);
  }
  const std::vector<Held> full = r.run(gather, args);
  for (size_t i = 0; i < full.size(); ++i) s.gathered[gather.args.at(i).name] = full[i].id;
  r.point(0, "whole parameters kept for the micro-batches");
}

// Engine::reduce_gradients: the whole parameters go, then the summed local
// gradients are handed to the reduce trace, whose shards are the gradients.
std::vector<Held> reduce_gradients(StepReplay& r, const Trace& reduce, RankState& s, std::vector<Held> local) {
  r.phase("reduce");
  for (const auto& [name, id] : s.gathered) r.mem().drop(id);
  s.gathered.clear();
  r.point(0, "whole parameters freed");
  std::vector<int> args;
  for (const Held& h : local) args.push_back(h.id);
  std::vector<Held> shards = r.run(reduce, args);
  for (const Held& g : shards) r.mem().recategorize(g.id, MemCategory::gradients);
  r.point(0, "reduced shards kept as gradients");
  return shards;
}

// DiLoCo (runtime/engine_outer.cpp): Engine::start_outer_round, a copy of
// each trained parameter (and a zeroed momentum) as optimizer state.
void start_outer_round(StepReplay& r, const OuterStep& outer, RankState& s) {
  r.phase("outer round");
  for (const OuterFragment& f : outer.fragments) {
    bool momentum = false;
    for (const Proxy& a : (f.delayed() ? f.update : f.step).args)
      momentum = momentum || a.name.rfind("momentum_", 0) == 0;
    for (const Proxy& a : (f.delayed() ? f.issue : f.step).args) {
      if (!a.is_param()) continue;
      s.anchors[a.name] = r.mem().allocate(bytes_of(a.type), MemCategory::optimizer_state);
      if (momentum) s.momenta[a.name] = r.mem().allocate(bytes_of(a.type), MemCategory::optimizer_state);
    }
  }
  r.point(0, "anchors copied from the parameters");
}

// Engine::outer_args: `first` handed over, the parameters by reference, the
// anchors and momenta handed over (`take_state`) or by reference.
std::vector<int> outer_args(StepReplay& r, const Trace& t, const std::vector<Held>& first, RankState& s,
                            bool take_state) {
  std::vector<int> args;
  size_t k = 0;
  for (const Proxy& a : t.args) {
    int id;
    if (a.is_param()) {
      auto it = std::find_if(s.params.begin(), s.params.end(), [&](const ParamBlock& p) { return p.proxy == a.name; });
      FSDPC_CHECK(it != s.params.end()) << "memory plan: the outer step reads no parameter " << a.name;
      id = it->id;
      r.mem().hold(id);
    } else if (a.name.rfind("anchor_", 0) == 0 || a.name.rfind("momentum_", 0) == 0) {
      const bool anchor = a.name[0] == 'a';
      id = (anchor ? s.anchors : s.momenta).at(a.name.substr(anchor ? 7 : 9));
      if (!take_state) r.mem().hold(id);
    } else {
      id = first.at(k++).id;
    }
    args.push_back(id);
  }
  return args;
}

// Engine::outer_update: the new anchors and momenta kept as optimizer state,
// a mix copied into the parameters and dropped.
void outer_update(StepReplay& r, const OuterFragment& f, const Trace& t, std::vector<Held> landed, RankState& s) {
  std::vector<Held> outs = r.run(t, outer_args(r, t, landed, s, true));
  const bool momentum = !s.momenta.empty();
  std::vector<std::string> params;  // in the order of the returns (Engine::bind_outer_step)
  for (const Proxy& a : (f.delayed() ? f.issue : f.step).args)
    if (a.is_param()) params.push_back(a.name);
  const size_t n = params.size();
  for (size_t j = 0; j < outs.size(); ++j) {
    if (j < n) {
      r.mem().recategorize(outs[j].id, MemCategory::optimizer_state);
      s.anchors[params[j]] = outs[j].id;
    } else if (momentum && j < 2 * n) {
      r.mem().recategorize(outs[j].id, MemCategory::optimizer_state);
      s.momenta[params[j - n]] = outs[j].id;
    }
  }
  r.point(0, "new anchors copied into the parameters");
  for (size_t j = (momentum ? 2 : 1) * n; j < outs.size(); ++j) r.mem().drop(outs[j].id);
}

// Engine::land: the futures (copied), then every held value dropped.
void land(StepReplay& r, const OuterFragment& f, RankState::Exchange& x) {
  if (x.landed) return;
  std::vector<int> futures;
  for (size_t i = 0; i < f.land.args.size(); ++i) {
    r.mem().hold(x.held[i].id);
    futures.push_back(x.held[i].id);
  }
  std::vector<Held> means = r.run(f.land, futures);
  for (const Held& h : x.held) r.mem().drop(h.id);
  x.held = std::move(means);
  x.landed = true;
}

// Engine::outer_after_update.
void outer_after_update(StepReplay& r, const OuterStep& outer, RankState& s, int64_t k) {
  if (!outer.runs_after(k)) return;
  r.phase("outer step");
  for (size_t i = 0; i < s.in_flight.size();) {
    RankState::Exchange& x = s.in_flight[i];
    if (x.lands_at != k) {
      ++i;
      continue;
    }
    const OuterFragment& f = outer.fragments.at(x.fragment);
    land(r, f, x);
    outer_update(r, f, f.update, std::move(x.held), s);
    s.in_flight.erase(s.in_flight.begin() + static_cast<std::ptrdiff_t>(i));
  }
  for (size_t fi = 0; fi < outer.fragments.size(); ++fi) {
    const OuterFragment& f = outer.fragments[fi];
    if (k % outer.every != f.offset) continue;
    if (!f.delayed()) {
      outer_update(r, f, f.step, {}, s);
      continue;
    }
    std::vector<Held> held = r.run(f.issue, outer_args(r, f.issue, {}, s, false));
    for (const Held& h : held) r.mem().recategorize(h.id, MemCategory::communication);
    r.point(0, "the exchange in flight kept");
    s.in_flight.push_back({fi, k + outer.delay, false, std::move(held)});
  }
}

// Engine::train_step; `count`: the optimizer's count after its update,
// which decides DiLoCo's outer traces (none: the step runs none).
void train_step(AllocatorModel& mem, StepMemory& out, const EngineTraces& traces, const EngineOptions& o,
                RankState& s, bool peaks_only, int stage, std::optional<int64_t> count) {
  StepReplay r(mem, out, peaks_only);
  if (traces.outer && s.anchors.empty()) start_outer_round(r, *traces.outer, s);
  const int k_total = o.grad_accum;
  const bool no_sync = o.no_sync && k_total > 1;
  std::vector<Held> grads, sum, local;
  if (traces.gathered) gather_parameters(r, traces.gathered->gather, s);
  if (o.mesh.pp > 1) pipeline_micro_batches(r, traces, o, s, stage, traces.gathered ? local : sum);
  for (int k = 0; k < k_total && o.mesh.pp == 1; ++k) {
    const std::string label = std::to_string(k + 1) + "/" + std::to_string(k_total);
    if (traces.gathered) {
      grads = micro_step(r, traces.gathered->micro, s, {}, label + " gathered");
      add_into(r, local, grads);
    } else if (!no_sync) {
      grads = micro_step(r, traces.sync, s, {}, label);
      add_into(r, sum, grads);
    } else if (k + 1 < k_total) {
      grads = micro_step(r, *traces.no_sync, s, {}, label + " no_sync");
      add_into(r, local, grads);
    } else {
      sum = micro_step(r, *traces.accumulate, s, local, label + " accumulate");
      for (const Held& h : local) mem.drop(h.id);
      local.clear();
      r.point(0, "no_sync gradients freed");
    }
  }
  if (traces.gathered) sum = reduce_gradients(r, traces.gathered->reduce, s, std::move(local));
  // Clipping works in place (sum_squares, scale); Optimizer::state_for makes
  // each parameter's state on its first update, in argument order.
  r.phase("optimizer");
  if (!s.has_optimizer_state) {
    const bool adamw = o.optimizer.kind == OptimizerOptions::Kind::adamw;
    for (const Held& g : sum) {
      const int64_t bytes = numel(g.type.shape) * static_cast<int64_t>(sizeof(float));
      if (adamw || o.optimizer.momentum != 0) mem.allocate(bytes, MemCategory::optimizer_state);
      if (adamw) mem.allocate(bytes, MemCategory::optimizer_state);
    }
    s.has_optimizer_state = true;
  }
  r.point(0, "update of the local shards");
  for (const Held& g : sum) mem.drop(g.id);
  r.point(0, "gradients freed at the step's end");
  if (traces.outer && count) outer_after_update(r, *traces.outer, s, *count);
  r.finish();
  out.reserved = mem.reserved();
}

// Engine::forward: the validation loss between steps (the training
// forward without the head's gradients).
void evaluation(AllocatorModel& mem, StepMemory& out, const StepTraces& t, const RankState& s) {
  StepReplay r(mem, out, false);
  r.phase("evaluation forward");
  const Trace forward = without_head_grads(t.forward);
  for (const Held& h : r.run(forward, forward_args(r, forward, s))) mem.drop(h.id);
  r.point(0, "outputs read and freed");
  out.reserved = mem.reserved();
}

StepTraces lowered(const StepTraces& t, const EngineOptions& o) {
  return {execution_trace(t.forward, o.target, o.fusion), execution_trace(t.backward, o.target, o.fusion)};
}

}  // namespace

const StepMemory* MemoryPlan::step_at(int64_t k) const {
  if (streaming_steps.empty() || k < 1) return nullptr;
  const int64_t n = static_cast<int64_t>(streaming_steps.size()), period = streaming_every;
  return &streaming.at(streaming_steps[static_cast<size_t>(k <= n ? k - 1 : n - period + (k - n - 1) % period)]);
}

size_t MemoryPhase::peak_point() const {
  size_t best = 0;
  for (size_t i = 1; i < points.size(); ++i)
    if (points[i].total > points[best].total) best = i;
  return best;
}

std::string StepMemory::peak_where() const {
  const MemoryPoint& p = peak_at();
  return phases.at(peak_phase).name + (p.statement ? ", statement " + std::to_string(p.statement) + ": " : ": ") +
         p.what;
}

size_t backend_alignment(Target target) {
  switch (target) {
    case Target::cpu: return cpu_backend().alignment();
    case Target::cuda: return 256;  // executors/cuda/cuda_backend.cpp
  }
  fail("memory plan: target ", static_cast<int>(target), " is not a Target");
}

namespace {

// What decides a fresh streaming run's step k beyond the step itself: the
// first step (the round starts, the optimizer state is made), and per
// fragment whether its exchange is in flight at the start, lands after the
// update, or is issued after it. Steps of one kind hold the same memory.
std::string streaming_kind(const OuterStep& o, int64_t k) {
  std::string kind = k == 1 ? "first" : "";
  for (size_t f = 0; f < o.fragments.size(); ++f) {
    const int64_t offset = o.fragments[f].offset;
    char state = '-';
    for (int64_t k0 = std::max<int64_t>(1, k - o.delay); k0 < k; ++k0)
      if (k0 % o.every == offset) state = k0 + o.delay == k ? 'L' : 'F';
    kind += state;
    kind += k % o.every == offset ? 'I' : '-';
  }
  return kind;
}

// Streaming DiLoCo's steps differ by where they fall in the round (which
// fragments issue, are in flight or land): a fresh run's steps 1..2H+TAU+1
// (after which their kinds repeat with period H) are planned by kind. A step
// whose kind was met before and that runs no outer trace changes nothing the
// later steps see, so it is not replayed (H is 500 in the paper); the first
// steps are, until the cache of blocks settles, for the reserved bytes.
// `outer` is the highest kind.
void plan_streaming(AllocatorModel& mem, MemoryPlan& plan, const EngineTraces& low, const EngineOptions& options,
                    RankState& s, bool peaks_only, int stage) {
  const OuterStep& o = *low.outer;
  const int64_t steps = 2 * static_cast<int64_t>(o.every) + o.delay + 1;
  plan.streaming_every = o.every;
  std::map<std::string, size_t> kinds;
  bool settling = true;  // every step replayed so far, the cache still growing
  for (int64_t k = 1; k <= steps; ++k) {
    const std::string kind = streaming_kind(o, k);
    auto known = kinds.find(kind);
    if (known != kinds.end() && !o.runs_after(k) && !settling) {
      plan.streaming_steps.push_back(known->second);
      continue;
    }
    StepMemory step;
    train_step(mem, step, low, options, s, peaks_only, stage, k);
    if (settling) {
      settling = plan.reserved_after_step.empty() || step.reserved != plan.reserved_after_step.back();
      plan.reserved_after_step.push_back(step.reserved);
    }
    if (known == kinds.end()) {
      known = kinds.emplace(kind, plan.streaming.size()).first;
      plan.streaming.push_back(std::move(step));
    }
    plan.streaming_steps.push_back(known->second);
  }
  plan.first = plan.streaming.at(plan.streaming_steps.front());
  plan.steady = plan.streaming.at(plan.streaming_steps.back());
  plan.outer = *std::max_element(plan.streaming.begin(), plan.streaming.end(),
                                 [](const StepMemory& a, const StepMemory& b) { return a.total_peak < b.total_peak; });
}

// The replay of lowered traces; `peaks_only` as plan_memory_peaks says.
MemoryPlan plan_lowered(const EngineTraces& low, const EngineOptions& options, bool peaks_only, int stage) {
  if (options.grad_accum < 1) fail("--grad-accum must be at least 1, got ", options.grad_accum);
  MemoryPlan plan;
  plan.target = options.target;
  plan.alignment = backend_alignment(options.target);
  plan.grad_accum = options.grad_accum;
  plan.no_sync = options.no_sync && options.grad_accum > 1;
  if (plan.no_sync) {
    FSDPC_CHECK(low.no_sync && low.accumulate) << "memory plan: no_sync accumulation needs its traces";
  }
  AllocatorModel mem(plan.alignment, options.target);
  RankState s;
  for (const Proxy& a : low.sync.forward.args)  // Engine::Engine, in argument order
    if (a.is_param()) s.params.push_back({a.name, mem.allocate(bytes_of(a.type), MemCategory::parameters), a.requires_grad});
  // Streaming DiLoCo: every step of a fresh run until they repeat.
  if (low.outer && (low.outer->fragments.size() > 1 || low.outer->delay > 0)) {
    plan_streaming(mem, plan, low, options, s, peaks_only, stage);
    if (!peaks_only) evaluation(mem, plan.evaluation, low.sync, s);
    return plan;
  }
  // DiLoCo: a step ends a round every H steps; with H = 1 every one does.
  const bool every_step_outer = low.outer && low.outer->every == 1;
  const std::optional<int64_t> plain = every_step_outer ? std::optional<int64_t>(1) : std::nullopt;
  train_step(mem, plan.first, low, options, s, peaks_only, stage, plain);
  plan.reserved_after_step.push_back(plan.first.reserved);
  // Later steps repeat the same allocations; the cache grows until it holds
  // a block for each of them, which takes a step or two. What is live does
  // not depend on the cache, so every later step has the same peaks: the
  // peaks alone need one.
  for (int i = 0; i < (peaks_only ? 1 : 8); ++i) {
    StepMemory step;
    train_step(mem, step, low, options, s, peaks_only, stage, plain);
    const bool settled = step.reserved == plan.reserved_after_step.back();
    plan.reserved_after_step.push_back(step.reserved);
    plan.steady = std::move(step);
    if (settled) break;
  }
  if (low.outer) {
    if (every_step_outer) {
      plan.outer = plan.steady;
    } else {
      plan.outer.emplace();
      train_step(mem, *plan.outer, low, options, s, peaks_only, stage, low.outer->every);
    }
  }
  if (!peaks_only) evaluation(mem, plan.evaluation, low.sync, s);
  return plan;
}

}  // namespace

MemoryPlan plan_memory(const EngineTraces& traces, const EngineOptions& options, int pipeline_stage) {
  if (options.grad_accum < 1) fail("--grad-accum must be at least 1, got ", options.grad_accum);
  const bool no_sync = options.no_sync && options.grad_accum > 1;
  EngineTraces low{lowered(traces.sync, options), {}, {}};
  if (no_sync) {
    FSDPC_CHECK(traces.no_sync && traces.accumulate) << "memory plan: no_sync accumulation needs its traces";
    low.no_sync = lowered(*traces.no_sync, options);
    low.accumulate = lowered(*traces.accumulate, options);
  }
  if (options.keep_gathered) {
    FSDPC_CHECK(traces.gathered) << "memory plan: keep_gathered needs the gathered step's traces";
    low.gathered = GatheredStep{execution_trace(traces.gathered->gather, options.target, options.fusion),
                                execution_trace(traces.gathered->reduce, options.target, options.fusion),
                                lowered(traces.gathered->micro, options)};
  }
  if (traces.outer) low.outer = lower_outer_step(*traces.outer, options.target, options.fusion);
  return plan_lowered(low, options, false, pipeline_stage);
}

MemoryPlan plan_memory_peaks(const EngineTraces& lowered_traces, const EngineOptions& options, int pipeline_stage) {
  return plan_lowered(lowered_traces, options, true, pipeline_stage);
}

MemBytes combined_peak(const StepMemory& step, const StepMemory* evaluation, int64_t& total) {
  MemBytes peak = step.peak;
  total = step.total_peak;
  if (evaluation) {
    for (size_t c = 0; c < kNumMemCategories; ++c) peak[c] = std::max(peak[c], evaluation->peak[c]);
    total = std::max(total, evaluation->total_peak);
  }
  return peak;
}

}  // namespace fsdpc
