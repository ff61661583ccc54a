// The default pipeline, one pass per line, top to bottom.
#include "passes/pipeline.h"

#include <chrono>

#include "ir/error.h"
#include "ir/verifier.h"
#include "passes/bucketing.h"
#include "passes/quantize_gathers.h"
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/elide_identities.h"
#include "passes/del.h"
#include "passes/autocast.h"
#include "passes/fsdp.h"
#include "passes/fuse_head.h"
#include "passes/grad.h"
#include "passes/head_grad_forward.h"
#include "passes/pipeline_split.h"
#include "passes/remat.h"
#include "passes/schedule.h"
#include "passes/split.h"
#include "passes/tensor_parallel.h"
#include "passes/stats.h"
#include "passes/scatter_into.h"
#include "passes/widen_accumulation.h"
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

// Live bytes beyond the parameters at the worse of the two traces' peaks.
int64_t activation_peak(const std::vector<Trace>& traces) {
  int64_t peak = 0;
  for (const Trace& t : traces) {
    const TraceStats s = trace_stats(t);
    peak = std::max(peak, s.peak_live_bytes - s.param_bytes);
  }
  return peak;
}

// dce, cse, bucketing, schedule and del, unverified and unkept: what
// compile() makes of a split, for the budget search below.
SplitResult after_split(SplitResult fb, const JointTrace& j, const PipelineOptions& o) {
  PipelineOptions quiet = o;
  quiet.verify = false;
  return compile_schedule(compile_bucketing(compile_cleanup(std::move(fb), quiet, nullptr), j, quiet, nullptr), j,
                          quiet, nullptr);
}

// auto with a budget: the fewest units, first to last, whose forward is
// recomputed from their input (the cut decides the rest) that keep the
// activation peak under the budget. More checkpointed units never raise the
// peak, so a binary search finds it.
size_t units_to_checkpoint(const JointTrace& j, RematPlan plan, const PipelineOptions& o) {
  auto peak_with = [&](size_t k) {
    plan.blocked_units = k;
    const std::unordered_set<std::string> recompute = remat_recomputable(j.trace, plan);
    const SplitResult fb = after_split(split(j.trace, SplitOptions{plan.regather_params, &recompute}), j, o);
    return activation_peak({fb.forward, fb.backward});
  };
  const size_t n = checkpointable_units(j.trace, plan.units);
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
  check_diloco_options(o.diloco, o.strategy);
  if (o.int8_gathers && o.strategy == Strategy::no_shard)
    fail("--gather-dtype int8 quantizes the parameters' all_gathers; --strategy no_shard gathers none "
         "(use zero3, zero2, hybrid or hybrid_zero2)");
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


void StageLog::keep(std::string name, std::vector<Trace> traces) {
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - started_).count();
  stages_.push_back({std::move(name), std::move(traces), ms});
}

namespace {

// A pass's result: verified when the options say so, kept in `log` if there
// is one. The pass's time ends where this begins and the next one's starts
// after it, so neither copying nor verifying is counted.
void record(StageLog* log, const PipelineOptions& o, const std::string& name, std::initializer_list<const Trace*> traces) {
  if (log) {
    std::vector<Trace> kept;
    for (const Trace* t : traces) kept.push_back(*t);
    log->keep(name, std::move(kept));
  }
  if (o.verify)
    for (const Trace* t : traces) check(*t, name);
  if (log) log->restart_clock();
}

}  // namespace

JointTrace compile_joint(const Trace& captured, const PipelineOptions& o, StageLog* log) {
  record(log, o, "trace", {&captured});
  // The head fused with its loss first, on the captured trace, so that every
  // pass after it (tp's vocabulary-parallel split of it, fsdp's gathers,
  // autocast, grad's rule for the fused op) sees one statement. Shown only
  // when a head was fused.
  Trace fused_head;
  const bool fuse = o.loss_chunk.fuse;
  if (fuse) {
    fused_head = fuse_head(captured, o.loss_chunk);
    if (fused_head.bsyms.size() != captured.bsyms.size()) record(log, o, "fuse_head", {&fused_head});
  }
  const Trace& source = fuse ? fused_head : captured;
  // Tensor parallelism splits the layers first; fsdp then shards the local
  // parameters over the data-parallel ranks.
  Trace split_layers;
  if (o.mesh.tp > 1) {
    split_layers =
        tensor_parallel(source, TensorParallelOptions{o.mesh.tp, o.sequence_parallel, o.tensor_parallel_plan});
    record(log, o, "tp", {&split_layers});
  }
  JointTrace j;
  Trace sharded = fsdp(o.mesh.tp > 1 ? split_layers : source, FsdpOptions{o.strategy, o.mesh, !o.diloco.enabled()});
  j.units = wrap_units(sharded, o.wrap);  // FSDP units, for bucketing and schedule
  j.grad_params = gradient_params(sharded);
  record(log, o, "fsdp", {&sharded});
  if (o.precision != DType::f32) {
    sharded = autocast(sharded, o.precision, o.reduce_dtype);
    record(log, o, "autocast", {&sharded});
  }
  std::vector<std::string> input_grads;
  if (o.pipeline_stage && !o.pipeline_stage->input.empty()) input_grads.push_back(o.pipeline_stage->input);
  j.trace = grad(sharded, GradOptions{o.sync_grads, o.accumulate_grads, input_grads});
  record(log, o, "grad", {&j.trace});
  // At world size 1, or on a mesh dimension of 1, the gathers, reductions
  // and 1/N scaling copy without changing a value: shown only when it did.
  // keep_collectives keeps the collectives (to test their paths).
  if (Trace elided = elide_identities(j.trace, {.collectives = !o.keep_collectives});
      elided.bsyms.size() != j.trace.bsyms.size()) {
    j.trace = std::move(elided);
    record(log, o, "elide", {&j.trace});
  }
  // Mixed precision's gradients leave bf16 through a cast to f32: their
  // products and sums accumulate into f32 instead (shown when any did).
  if (Trace widened = widen_accumulation(j.trace); widened.provenance == "widen") {
    j.trace = std::move(widened);
    record(log, o, "widen", {&j.trace});
  }
  // A tied embedding's lookup gradient scatters into its head's gradient
  // instead of onto zeros that are then added (shown when any did).
  if (Trace folded = scatter_into(j.trace); folded.provenance == "scatter_into") {
    j.trace = std::move(folded);
    record(log, o, "scatter_into", {&j.trace});
  }
  // The fused head's gradients computed with its loss, the cotangent being
  // known up front (not for a pipeline stage: GPipe would hold every
  // micro-batch's weight gradient).
  if (!(o.pipeline_stage && o.pipeline_stage->stages > 1))
    if (Trace early = head_grad_forward(j.trace); early.provenance == "head_grad_forward") {
      j.trace = std::move(early);
      record(log, o, "head_grad_forward", {&j.trace});
    }
  return j;
}

SplitResult compile_split(const JointTrace& j, const PipelineOptions& o, StageLog* log) {
  // auto checkpoints whole units only when a budget asks for it.
  const size_t blocked = o.remat.mode == RematMode::auto_cut ? 0 : SIZE_MAX;
  RematPlan remat{o.remat.mode, j.units, blocked, regathers_in_backward(o.strategy)};
  if (o.remat.mode == RematMode::auto_cut && o.remat.budget_bytes > 0)
    remat.blocked_units = units_to_checkpoint(j, remat, o);
  const std::unordered_set<std::string> recompute = remat_recomputable(j.trace, remat);
  SplitResult fb = split(j.trace, SplitOptions{regathers_in_backward(o.strategy), &recompute});
  if (o.pipeline_stage && o.pipeline_stage->stages > 1) {
    const std::string stage = "stage" + std::to_string(o.pipeline_stage->stage);
    fb.forward.name = stage + "_forward";
    fb.backward.name = stage + "_backward";
    record(log, o, "split", {&fb.forward, &fb.backward});
    fb = pipeline_p2p(fb, *o.pipeline_stage);
    record(log, o, "p2p", {&fb.forward, &fb.backward});
  } else {
    record(log, o, "split", {&fb.forward, &fb.backward});
  }
  return compile_cleanup(std::move(fb), o, log);
}

SplitResult compile_cleanup(SplitResult fb, const PipelineOptions& o, StageLog* log) {
  fb.forward = dce(std::move(fb.forward));
  fb.backward = dce(std::move(fb.backward));
  record(log, o, "dce", {&fb.forward, &fb.backward});
  fb.forward = cse(std::move(fb.forward));
  fb.backward = cse(std::move(fb.backward));
  record(log, o, "cse", {&fb.forward, &fb.backward});
  return fb;
}

SplitResult compile_bucketing(const SplitResult& fb, const JointTrace& j, const PipelineOptions& o, StageLog* log) {
  const BucketingOptions bucket{o.strategy, j.units, o.bucketing, o.bucket_mb, o.int8_gathers, j.grad_params};
  SplitResult out{bucketing(fb.forward, bucket), bucketing(fb.backward, bucket), fb.saved};
  sync_saved_types(out.forward, out.backward);
  record(log, o, "bucketing", {&out.forward, &out.backward});
  if (!o.int8_gathers) return out;
  out.forward = quantize_gathers(out.forward);
  out.backward = quantize_gathers(out.backward);
  record(log, o, "quantize_gathers", {&out.forward, &out.backward});
  return out;
}

SplitResult compile_schedule(const SplitResult& fb, const JointTrace& j, const PipelineOptions& o, StageLog* log,
                             bool place_dels) {
  const ScheduleOptions sched{o.prefetch, o.max_inflight, j.units};
  SplitResult out{schedule(fb.forward, sched), schedule(fb.backward, sched), fb.saved};
  record(log, o, "schedule", {&out.forward, &out.backward});
  if (!place_dels) return out;
  out.forward = insert_dels(out.forward);
  out.backward = insert_dels(out.backward);
  record(log, o, "del", {&out.forward, &out.backward});
  return out;
}

std::vector<Stage> compile(const Trace& captured, const PipelineOptions& o) {
  validate(o);
  FSDPC_CHECK(o.pp == 1 || o.pipeline_stage) << "compile() runs one pipeline stage; --pp goes to compile_pipeline()";
  StageLog log;
  const JointTrace j = compile_joint(captured, o, &log);
  compile_schedule(compile_bucketing(compile_split(j, o, &log), j, o, &log), j, o, &log);
  return log.take();
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
