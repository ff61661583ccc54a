// The default pipeline, one pass per line, top to bottom.
#include "passes/pipeline.h"

#include <chrono>

#include "ir/error.h"
#include "ir/verifier.h"
#include "passes/bucketing.h"
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/elide_identities.h"
#include "passes/del.h"
#include "passes/autocast.h"
#include "passes/fsdp.h"
#include "passes/grad.h"
#include "passes/pipeline_split.h"
#include "passes/remat.h"
#include "passes/schedule.h"
#include "passes/split.h"
#include "passes/tensor_parallel.h"
#include "passes/stats.h"
#include "passes/wrap.h"

namespace fsdpc {

namespace {
void check(const Trace& t, const std::string& stage) {
  try {
    verify(t);
  } catch (const Error& e) {
    FSDPC_CHECK(false) << "the " << stage << " pass produced an invalid trace: " << e.what();
  }
}

// The passes after split, in order. `both(name, pass)` applies a pass to the
// forward and backward traces the previous one left and keeps the result;
// `sync()` follows bucketing (sync_saved_types on the current pair).
template <typename Both, typename Sync>
void after_split(const PipelineOptions& o, const std::vector<Unit>& units, const std::vector<std::string>& grad_params,
                 Both&& both, Sync&& sync) {
  both("dce", [](const Trace& t) { return dce(t); });
  both("cse", [](const Trace& t) { return cse(t); });
  const BucketingOptions bucket{o.strategy, units, o.bucketing, o.bucket_mb, grad_params};
  const ScheduleOptions sched{o.prefetch, o.max_inflight, units};
  both("bucketing", [&](const Trace& t) { return bucketing(t, bucket); });
  sync();
  both("schedule", [&](const Trace& t) { return schedule(t, sched); });
  both("del", [](const Trace& t) { return insert_dels(t); });
}

// Live bytes beyond the parameters at the worse of the two traces' peaks.
int64_t activation_peak(const std::vector<Trace>& traces) {
  int64_t peak = 0;
  for (const Trace& t : traces) {
    const TraceStats s = trace_stats(t);
    peak = std::max(peak, s.peak_live_bytes - s.param_bytes);
  }
  return peak;
}

// auto with a budget: the fewest units, first to last, whose forward is
// recomputed from their input (the cut decides the rest) that keep the
// activation peak under the budget. More checkpointed units never raise the
// peak, so a binary search finds it.
size_t units_to_checkpoint(const Trace& joint, RematPlan plan, const PipelineOptions& o,
                           const std::vector<std::string>& grad_params) {
  auto peak_with = [&](size_t k) {
    plan.blocked_units = k;
    const std::unordered_set<std::string> recompute = remat_recomputable(joint, plan);
    SplitResult fb = split(joint, SplitOptions{plan.regather_params, &recompute});
    std::vector<Trace> cur{std::move(fb.forward), std::move(fb.backward)};
    auto both = [&](const std::string&, auto&& pass) { cur = {pass(cur[0]), pass(cur[1])}; };
    after_split(o, plan.units, grad_params, both, [&] { sync_saved_types(cur[0], cur[1]); });
    return activation_peak(cur);
  };
  const size_t n = checkpointable_units(joint, plan.units);
  const int64_t lowest = peak_with(n);
  if (lowest > o.remat.budget_bytes)
    fail("--remat auto:", o.remat.budget_bytes, ": no plan keeps the activation peak (live bytes beyond the parameters) ",
         "under the budget; the lowest, with every one of the ", n, " blocks recomputed, is ", lowest, " bytes");
  size_t lo = 0, hi = n;  // peak_with(hi) fits
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (peak_with(mid) <= o.remat.budget_bytes)
      hi = mid;
    else
      lo = mid + 1;
  }
  return hi;
}

void validate(const PipelineOptions& o) {
  if (o.prefetch < 0) fail("--prefetch must be >= 0, got ", o.prefetch);
  if (o.max_inflight < 1) fail("--max-inflight must be >= 1, got ", o.max_inflight);
  if (!(o.bucket_mb > 0)) fail("--bucket-mb must be positive, got ", o.bucket_mb);
  if (o.mesh.tp < 1) fail("--tp must be at least 1, got ", o.mesh.tp);
  if (o.sequence_parallel && o.mesh.tp < 2)
    fail("--sequence-parallel splits the sequence across tensor-parallel ranks; it needs --tp 2 or more");
  if (o.mesh.world() < 1) fail("world size must be at least 1");
  if (o.pp < 1) fail("--pp must be at least 1, got ", o.pp);
  FSDPC_CHECK(o.mesh.pp == 1) << "PipelineOptions::mesh is one pipeline stage's; the stage count is PipelineOptions::pp";
  if (!o.pp_balance.empty() && o.pp < 2) fail("--pp-balance lists blocks per pipeline stage; it needs --pp 2 or more");
}
}  // namespace

void sync_saved_types(const Trace& fwd, Trace& bwd) {
  const ReturnTree& saved = fwd.returns.items.at(1);
  FSDPC_CHECK(saved.items.size() <= bwd.args.size()) << "backward takes fewer arguments than saved";
  std::unordered_map<std::string, const TensorType*> types;
  for (const Proxy& a : fwd.args) types[a.name] = &a.type;
  for_each_bsym(fwd.bsyms, [&](const BoundSymbol& b) {
    for (const Proxy& o : b.outputs) types[o.name] = &o.type;
  });
  for (size_t i = 0; i < saved.items.size(); ++i) bwd.args[i].type = *types.at(saved.items[i].name);
}


std::vector<Stage> compile(const Trace& captured, const PipelineOptions& o) {
  validate(o);
  FSDPC_CHECK(o.pp == 1 || o.pipeline_stage) << "compile() runs one pipeline stage; --pp goes to compile_pipeline()";
  std::vector<Stage> stages;
  using Clock = std::chrono::steady_clock;
  Clock::time_point started = Clock::now();
  auto keep = [&](std::string name, std::vector<Trace> traces) {
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
    if (o.verify)
      for (const Trace& t : traces) check(t, name);
    stages.push_back({std::move(name), std::move(traces), ms});
    started = Clock::now();
  };
  // Applies a pass to both the forward and the backward trace.
  auto both = [&](const std::string& name, auto&& pass) {
    const std::vector<Trace>& last = stages.back().traces;
    keep(name, {pass(last[0]), pass(last[1])});
  };

  keep("trace", {captured});
  // Tensor parallelism splits the layers first; fsdp then shards the local
  // parameters over the data-parallel ranks.
  if (o.mesh.tp > 1) keep("tp", {tensor_parallel(captured, TensorParallelOptions{o.mesh.tp, o.sequence_parallel})});
  Trace sharded = fsdp(stages.back().traces[0], FsdpOptions{o.strategy, o.mesh});
  const std::vector<Unit> units = wrap_units(sharded, o.wrap);  // FSDP units, for bucketing and schedule
  const std::vector<std::string> grad_params = gradient_params(sharded);
  keep("fsdp", {std::move(sharded)});
  if (o.precision != DType::f32) keep("autocast", {autocast(stages.back().traces[0], o.precision)});
  std::vector<std::string> input_grads;
  if (o.pipeline_stage && !o.pipeline_stage->input.empty()) input_grads.push_back(o.pipeline_stage->input);
  keep("grad", {grad(stages.back().traces[0], GradOptions{o.sync_grads, o.accumulate_grads, input_grads})});
  // At world size 1, or on a mesh dimension of 1, the gathers, reductions
  // and 1/N scaling copy without changing a value: shown only when it did.
  if (Trace elided = elide_identities(stages.back().traces[0]);
      elided.bsyms.size() != stages.back().traces[0].bsyms.size())
    keep("elide", {std::move(elided)});
  const Trace& joint = stages.back().traces[0];
  // auto checkpoints whole units only when a budget asks for it.
  const size_t blocked = o.remat.mode == RematMode::auto_cut ? 0 : SIZE_MAX;
  RematPlan remat{o.remat.mode, units, blocked, regathers_in_backward(o.strategy)};
  if (o.remat.mode == RematMode::auto_cut && o.remat.budget_bytes > 0)
    remat.blocked_units = units_to_checkpoint(joint, remat, o, grad_params);
  const std::unordered_set<std::string> recompute = remat_recomputable(joint, remat);
  SplitResult fb = split(joint, SplitOptions{regathers_in_backward(o.strategy), &recompute});
  if (o.pipeline_stage && o.pipeline_stage->stages > 1) {
    const std::string stage = "stage" + std::to_string(o.pipeline_stage->stage);
    fb.forward.name = stage + "_forward";
    fb.backward.name = stage + "_backward";
    keep("split", {fb.forward, fb.backward});
    fb = pipeline_p2p(fb, *o.pipeline_stage);
    keep("p2p", {std::move(fb.forward), std::move(fb.backward)});
  } else {
    keep("split", {std::move(fb.forward), std::move(fb.backward)});
  }
  after_split(o, units, grad_params, both,
              [&] { sync_saved_types(stages.back().traces[0], stages.back().traces[1]); });
  return stages;
}

std::vector<std::vector<Stage>> compile_pipeline(const Trace& captured, const PipelineOptions& o) {
  validate(o);
  if (o.pp == 1) return {compile(captured, o)};
  const auto started = std::chrono::steady_clock::now();
  std::vector<PipelineStageTrace> cut = pipeline_split(captured, PipelineSplitOptions{o.pp, o.pp_balance});
  const double split_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  std::vector<std::vector<Stage>> out;
  for (size_t s = 0; s < cut.size(); ++s) {
    PipelineOptions stage = o;
    stage.pipeline_stage = PipelineStagePeers{static_cast<int>(s), o.pp, cut[s].input, cut[s].output};
    out.push_back(compile(cut[s].trace, stage));
    out.back().front().name = "pp";  // compile's first stage: its input, the cut
    out.back().front().pass_ms = split_ms;
  }
  return out;
}

}  // namespace fsdpc
