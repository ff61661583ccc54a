// What `fsdpc dump` prints (runtime/dump.h).
#include "runtime/dump.h"

#include <algorithm>
#include <sstream>

#include "executors/claim.h"
#include "ir/error.h"
#include "passes/place.h"
#include "passes/render.h"
#include "runtime/planner/memory_plan.h"
#include "runtime/step_traces.h"

namespace fsdpc {

namespace {

PipelineOptions traces_pipeline(const DumpOptions& o) {
  PipelineOptions p = o.pipeline;
  p.sync_grads = !o.no_sync;
  p.accumulate_grads = o.accumulate;
  return p;
}

// Pipeline stages side by side: each pass's traces of stage 0, then of
// stage 1, ... (every stage runs the same passes; elide only where it
// removed something, so matched by name).
std::vector<Stage> merge_pipeline(std::vector<std::vector<Stage>> per_stage) {
  std::vector<Stage> out;
  for (std::vector<Stage>& stages : per_stage)
    for (Stage& s : stages) {
      auto it = std::find_if(out.begin(), out.end(), [&](const Stage& o) { return o.name == s.name; });
      if (it == out.end()) {
        out.push_back(std::move(s));
        continue;
      }
      it->pass_ms += s.pass_ms;
      for (Trace& t : s.traces) it->traces.push_back(std::move(t));
    }
  return out;
}

// The plan of one training step, compiled as fsdpc::jit compiles it: the
// synchronising traces, with no_sync the no_sync and accumulate traces
// beside them, with keep_gathered the gathered step's.
std::string memory_plans(const Trace& placed, const DumpOptions& o) {
  PipelineOptions p = o.pipeline;
  p.sync_grads = true;  // no_sync is the step's: its last micro-batch synchronises
  p.accumulate_grads = false;
  // Each pipeline stage's traces (one stage without --pp).
  const std::vector<EngineTraces> per_stage = step_traces(placed, p, compile_pipeline(placed, p),
                                                          MicroBatchOptions{o.grad_accum, o.no_sync, o.keep_gathered});
  EngineOptions e;
  e.mesh = p.mesh;
  e.mesh.pp = p.pp;
  e.pp_schedule = o.pp_schedule;
  e.target = o.target;
  e.fusion = o.fusion;
  e.grad_accum = o.grad_accum;
  e.no_sync = o.no_sync;
  e.keep_gathered = o.keep_gathered;
  e.optimizer.kind = o.optimizer;
  e.optimizer.momentum = o.momentum;
  if (per_stage.size() == 1) {
    const MemoryPlan plan = plan_memory(per_stage[0], e);
    return o.format == "json" ? memory_plan_json(plan) : memory_plan_text(plan);
  }
  // Pipeline stages hold different parameters and micro-batches: one plan each.
  std::string out = o.format == "json" ? "{\"pipeline_stages\": [\n" : "";
  for (size_t s = 0; s < per_stage.size(); ++s) {
    const MemoryPlan plan = plan_memory(per_stage[s], e, static_cast<int>(s));
    if (o.format == "json") {
      std::string one = memory_plan_json(plan);
      while (!one.empty() && one.back() == '\n') one.pop_back();
      out += one + (s + 1 < per_stage.size() ? ",\n" : "\n");
    } else {
      out += (s ? "\n" : "") + std::string("# pipeline stage ") + std::to_string(s) + " (" +
             pipeline_schedule_name(o.pp_schedule) + ")\n" + memory_plan_text(plan);
    }
  }
  return o.format == "json" ? out + "]}\n" : out;
}

}  // namespace

void check_dump_options(const DumpOptions& o) {
  executors_for(o.target);  // cuda in a CPU-only build fails before compiling
  if (!o.memory) return;
  if (o.format != "text" && o.format != "json") fail("--memory prints text or json, not ", o.format);
  if (o.accumulate) fail("--memory plans a whole step; --accumulate selects one of its traces");
  if (o.stats) fail("--memory and --stats print different reports; ask for one");
}

std::vector<Stage> dump_stages(const Trace& placed, const DumpOptions& o) {
  const PipelineOptions p = traces_pipeline(o);
  std::vector<Stage> stages;
  std::vector<Trace> final;  // what the executors claim for exec and fusion
  if (o.keep_gathered) {
    if (o.no_sync || o.accumulate)
      fail("--keep-gathered prints the gathered step's traces; --no-sync and --accumulate select another step's");
    // The micro-batches' passes, then the step's gather and reduce around
    // them (one pair per pipeline stage).
    const std::vector<std::vector<Stage>> sync = compile_pipeline(placed, p);
    stages = merge_pipeline(compile_pipeline(placed, gathered_micro_options(p)));
    Stage around{"gather_once", {}, 0};
    for (EngineTraces& t : step_traces(placed, p, sync, MicroBatchOptions{1, false, true}))
      around.traces.insert(around.traces.end(), {std::move(t.gathered->gather), std::move(t.gathered->reduce)});
    final = stages.back().traces;
    final.insert(final.end(), around.traces.begin(), around.traces.end());
    stages.push_back(std::move(around));
  } else {
    stages = merge_pipeline(compile_pipeline(placed, p));
    final = stages.back().traces;
  }
  if (p.diloco.enabled()) {
    // DiLoCo: the outer step's traces (per pipeline stage, per fragment:
    // the whole step, or with a delay its issue, land and update), run
    // beside the steps'.
    Stage outer{"outer_step", {}, 0};
    for (EngineTraces& t : step_traces(placed, p, compile_pipeline(placed, p), MicroBatchOptions{}))
      for (OuterFragment& f : t.outer->fragments)
        for (Trace* part : f.traces()) outer.traces.push_back(std::move(*part));
    final.insert(final.end(), outer.traces.begin(), outer.traces.end());
    stages.push_back(std::move(outer));
  }
  if (p.pp > 1) stages.insert(stages.begin(), Stage{"trace", {placed}, 0});
  // The execution traces: the final stage claimed by the executors.
  const bool all = o.stages.find("all") != std::string::npos;
  auto executed = [&](const std::string& name, FusionMode fusion) {
    Stage s{name, {}, 0};
    for (const Trace& t : final) s.traces.push_back(execution_trace(t, o.target, fusion));
    stages.push_back(std::move(s));
  };
  if (all || o.stages.find("exec") != std::string::npos) executed("exec", o.fusion);
  // The fused execution traces whatever `fusion` says (exec follows it);
  // named only, so that all prints exec once.
  if (o.stages.find("fusion") != std::string::npos) executed("fusion", FusionMode::automatic);
  return stages;
}

std::vector<const Trace*> select_traces(const std::vector<Stage>& stages, const std::string& spec) {
  std::vector<std::string> wanted;
  std::stringstream ss(spec);
  for (std::string item; std::getline(ss, item, ',');) wanted.push_back(item);
  std::vector<const Trace*> out;
  for (const std::string& w : wanted) {
    bool found = false;
    for (const Stage& s : stages) {
      bool all = w == "all";
      if (all || w == s.name) {
        for (const Trace& t : s.traces) out.push_back(&t);
        found = true;
      } else if (s.name == "split" && (w == "forward" || w == "backward")) {
        // One forward and backward per pipeline stage, in stage order.
        for (size_t i = w == "forward" ? 0 : 1; i < s.traces.size(); i += 2) out.push_back(&s.traces[i]);
        found = true;
      }
    }
    if (!found) {
      std::string names;
      for (const Stage& s : stages) names += s.name + ", ";
      fail("--stage: unknown stage '", w, "' (expected ", names, "forward, backward or all)");
    }
  }
  return out;
}

std::string dump(const Trace& captured, const DumpOptions& o) {
  check_dump_options(o);
  // Every stage prints the tensors where they will live.
  const Trace placed = place(captured, target_device(o.target));
  if (o.memory) return memory_plans(placed, o);
  const std::vector<Stage> stages = dump_stages(placed, o);
  const std::vector<const Trace*> traces = select_traces(stages, o.stages);
  if (o.stats && o.format != "text" && o.format != "json") fail("--stats prints text or json, not ", o.format);
  return o.stats ? render_trace_stats(traces, o.format) : render_traces(traces, o.format);
}

}  // namespace fsdpc
