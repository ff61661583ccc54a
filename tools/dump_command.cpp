// fsdpc dump: run the compilation pipeline and print the trace after each
// requested pass, headed by its `# Constructed by <pass>` line.
#include <algorithm>
#include <sstream>

#include "executors/claim.h"
#include "frontend/models/registry.h"
#include "runtime/step_traces.h"
#include "ir/error.h"
#include "passes/pipeline.h"
#include "passes/place.h"
#include "passes/stats.h"
#include "runtime/planner/memory_plan.h"
#include "tools/cli_io.h"
#include "tools/commands.h"

namespace fsdpc::cli {

namespace {

struct DumpArgs {
  ModelSource src;
  ShardingArgs sharding;
  int world = 1, rank = 0;
  std::string stages = "del";
  bool no_sync = false, accumulate = false, stats = false, memory = false, keep_gathered = false;
  std::string format = "text", output, executor = "cpu", fusion = "auto";
  // --memory: the step fsdpc train would run.
  int grad_accum = 1;
  std::string optimizer = "adamw";
  double momentum = 0;
};

PipelineOptions pipeline_options(const DumpArgs& a, const CLI::App& cmd) {
  PipelineOptions o = sharding_pipeline(
      a.sharding, a.world, cmd.count("--world-size") ? "--world-size is " + std::to_string(a.world) : "");
  if (a.rank < 0 || a.rank >= o.mesh.world() * o.pp)
    fail("--rank ", a.rank, " is outside a world of ", o.mesh.world() * o.pp);
  o.sync_grads = !a.no_sync;
  o.accumulate_grads = a.accumulate;
  o.tensor_parallel_plan = source_tensor_parallel_plan(a.src);
  return o;
}

// The traces the requested stages name, in pipeline order.
std::vector<const Trace*> select(const std::vector<Stage>& stages, const std::string& spec) {
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

std::string render_all(const std::vector<const Trace*>& traces, const std::string& format) {
  std::string out;
  if (format == "json" && traces.size() > 1) {
    out = "[\n";
    for (size_t i = 0; i < traces.size(); ++i) {
      std::string one = render(*traces[i], format);
      one.pop_back();  // the newline
      out += one + (i + 1 < traces.size() ? ",\n" : "\n");
    }
    return out + "]\n";
  }
  for (size_t i = 0; i < traces.size(); ++i) out += (i ? "\n" : "") + render(*traces[i], format);
  return out;
}

// --stats: the statistics of each selected trace instead of its text.
std::string render_stats(const std::vector<const Trace*>& traces, const std::string& format) {
  std::string out = format == "json" ? "[\n" : "";
  for (size_t i = 0; i < traces.size(); ++i) {
    const Trace& t = *traces[i];
    TraceStats st = trace_stats(t);
    if (format == "json") {
      out += "{\"trace\": \"" + t.name + "\", \"stage\": \"" + t.provenance + "\", \"stats\": " +
             stats_json(st) + "}" + (i + 1 < traces.size() ? ",\n" : "\n");
    } else {
      out += (i ? "\n" : "") + std::string("# ") + t.name + " after " + t.provenance + "\n" + stats_text(st);
    }
  }
  return format == "json" ? out + "]\n" : out;
}

// --memory: the plan of one training step (runtime/planner/memory_plan.h), compiled
// as fsdpc::jit compiles it: micro-batches of batch / K, and with --no-sync
// the no_sync and accumulate traces beside the synchronising ones, with
// --keep-gathered the gathered step's.
std::string render_memory_plan(const DumpArgs& a, const CLI::App& cmd, const std::string& executor) {
  if (a.format != "text" && a.format != "json") fail("--memory prints text or json, not ", a.format);
  if (a.accumulate) fail("--memory plans a whole step; --accumulate selects one of its traces");
  if (a.stats) fail("--memory and --stats print different reports; ask for one");
  ModelSource src = a.src;
  if (a.grad_accum > 1) {
    if (!src.trace_file.empty()) fail("--grad-accum ", a.grad_accum, " re-captures the model; a --trace file has its shapes");
    std::unique_ptr<Model> model = src.config.empty() ? make_model(src.model) : make_model_from_config(src.config);
    CaptureOptions co;
    if (src.seq) co.seq = src.seq;
    const int64_t batch = src.batch ? src.batch : model->inputs(co).at(0).shape.at(0);
    if (batch % a.grad_accum != 0)
      fail("--grad-accum ", a.grad_accum, ": the per-rank batch ", batch, " does not split into equal micro-batches");
    src.batch = batch / a.grad_accum;
  }
  const Trace captured = place(load_source_trace(src), executor_device(executor));
  PipelineOptions o = pipeline_options(a, cmd);
  o.sync_grads = true;
  // Each pipeline stage's traces (one stage without --pp).
  const std::vector<EngineTraces> per_stage = step_traces(captured, o, compile_pipeline(captured, o),
                                                          MicroBatchOptions{a.grad_accum, a.no_sync, a.keep_gathered});
  EngineOptions e;
  e.mesh = o.mesh;
  e.mesh.pp = o.pp;
  e.tensor_parallel_plan = o.tensor_parallel_plan;
  e.pp_schedule = *parse_pipeline_schedule(a.sharding.pp_schedule);  // CLI11 admitted only the names
  e.executor = executor;
  e.fusion = a.fusion;
  e.grad_accum = a.grad_accum;
  e.no_sync = a.no_sync;
  e.keep_gathered = a.keep_gathered;
  e.optimizer.kind = a.optimizer == "sgd" ? OptimizerOptions::Kind::sgd : OptimizerOptions::Kind::adamw;
  e.optimizer.momentum = a.momentum;
  if (per_stage.size() == 1) {
    const MemoryPlan plan = plan_memory(per_stage[0], e);
    return a.format == "json" ? memory_plan_json(plan) : memory_plan_text(plan);
  }
  // Pipeline stages hold different parameters and micro-batches: one plan each.
  std::string out = a.format == "json" ? "{\"pipeline_stages\": [\n" : "";
  for (size_t s = 0; s < per_stage.size(); ++s) {
    const MemoryPlan plan = plan_memory(per_stage[s], e, static_cast<int>(s));
    if (a.format == "json") {
      std::string one = memory_plan_json(plan);
      while (!one.empty() && one.back() == '\n') one.pop_back();
      out += one + (s + 1 < per_stage.size() ? ",\n" : "\n");
    } else {
      out += (s ? "\n" : "") + std::string("# pipeline stage ") + std::to_string(s) + " (" + a.sharding.pp_schedule +
             ")\n" + memory_plan_text(plan);
    }
  }
  return a.format == "json" ? out + "]}\n" : out;
}

}  // namespace

Command add_dump_command(CLI::App& app) {
  auto a = std::make_shared<DumpArgs>();
  CLI::App* cmd = app.add_subcommand(
      "dump", "Compile a model for N ranks and print the trace after the requested passes");
  add_model_options(cmd, a->src, /*allow_trace_file=*/true);
  cmd->add_option("--world-size", a->world, "Number of ranks")->check(whole_number(1))->capture_default_str();
  cmd->add_option("--rank", a->rank, "Rank whose traces to print (every rank runs the same traces)")
      ->capture_default_str();
  add_sharding_options(cmd, a->sharding);
  cmd->add_flag("--no-sync", a->no_sync, "Gradient-accumulation micro-batch: no gradient synchronisation");
  cmd->add_flag("--accumulate", a->accumulate, "Add accumulated local gradients (acc_*) before synchronising");
  cmd->add_flag("--keep-gathered", a->keep_gathered,
                "As fsdpc train --keep-gathered: the passes of the micro-batches on whole parameters, and stage "
                "gather_once (the step's gather and reduce traces)");
  cmd->add_option("--stage", a->stages, "NAME[,NAME...] | all (see `fsdpc passes`; forward, backward; exec: claimed by --executor; fusion: exec with regions fused)")
      ->capture_default_str();
  cmd->add_option("--executor", a->executor, "Executors: cpu (CPU kernels + MPI) | cuda (CUDA kernels + NCCL, on cuda:0) | auto (cuda when a GPU is visible)")
      ->capture_default_str();
  cmd->add_option("--fusion", a->fusion, "none | auto (exec: fuse elementwise ops and row reductions into regions where the executor has a fusion executor)")
      ->check(CLI::IsMember({"none", "auto"}))
      ->capture_default_str();
  cmd->add_flag("--stats", a->stats, "Print collective counts, bytes per rank and peak live bytes");
  cmd->add_flag("--memory", a->memory,
                "Print the memory plan of one training step per rank: live bytes by category at every statement, "
                "the peak and where it occurs (--grad-accum, --no-sync, --optimizer, --momentum as fsdpc train; "
                "--batch per rank)");
  cmd->add_option("--grad-accum", a->grad_accum, "With --memory: micro-batches per step")
      ->check(whole_number(1))->capture_default_str();
  cmd->add_option("--optimizer", a->optimizer, "With --memory: adamw | sgd")
      ->check(CLI::IsMember({"adamw", "sgd"}))->capture_default_str();
  cmd->add_option("--momentum", a->momentum, "With --memory: SGD momentum (0: no momentum buffer)")
      ->check(real_number(0, true, 1, true))->capture_default_str();
  cmd->add_option("--format", a->format, "Output form")->check(CLI::IsMember(formats()))->capture_default_str();
  cmd->add_option("-o,--output", a->output, "Write to FILE instead of standard output");
  return Command{cmd,
                 [a, cmd] {
                   PipelineOptions o = pipeline_options(*a, *cmd);
                   const std::string executor = resolve_executor(a->executor);
                   executors_for(executor);  // an unknown name fails before compiling
                   if (a->memory) return write_output(a->output, render_memory_plan(*a, *cmd, executor));
                   // Every stage prints the tensors where they will live.
                   const Trace captured = place(load_source_trace(a->src), executor_device(executor));
                   std::vector<Stage> stages;
                   std::vector<Trace> final;  // what the executors claim for exec and fusion
                   if (a->keep_gathered) {
                     if (a->no_sync || a->accumulate)
                       fail("--keep-gathered prints the gathered step's traces; --no-sync and --accumulate select "
                            "another step's");
                     // The micro-batches' passes, then the step's gather and
                     // reduce around them (one pair per pipeline stage).
                     const std::vector<std::vector<Stage>> sync = compile_pipeline(captured, o);
                     stages = merge_pipeline(compile_pipeline(captured, gathered_micro_options(o)));
                     Stage around{"gather_once", {}, 0};
                     for (EngineTraces& t : step_traces(captured, o, sync, MicroBatchOptions{1, false, true}))
                       around.traces.insert(around.traces.end(), {std::move(t.gathered->gather), std::move(t.gathered->reduce)});
                     final = stages.back().traces;
                     final.insert(final.end(), around.traces.begin(), around.traces.end());
                     stages.push_back(std::move(around));
                   } else {
                     stages = merge_pipeline(compile_pipeline(captured, o));
                     final = stages.back().traces;
                   }
                   if (o.pp > 1) stages.insert(stages.begin(), Stage{"trace", {captured}, 0});
                   // The execution traces: the final stage claimed by the executors.
                   const bool all = a->stages.find("all") != std::string::npos;
                   auto executed = [&](const std::string& name, const std::string& fusion) {
                     Stage s{name, {}, 0};
                     for (const Trace& t : final) s.traces.push_back(execution_trace(t, executor, fusion));
                     stages.push_back(std::move(s));
                   };
                   if (all || a->stages.find("exec") != std::string::npos) executed("exec", a->fusion);
                   // The fused execution traces whatever --fusion says (`exec`
                   // follows --fusion); named only, so `all` prints exec once.
                   if (a->stages.find("fusion") != std::string::npos) executed("fusion", "auto");
                   std::vector<const Trace*> traces = select(stages, a->stages);
                   if (a->stats && a->format != "text" && a->format != "json")
                     fail("--stats prints text or json, not ", a->format);
                   write_output(a->output, a->stats ? render_stats(traces, a->format) : render_all(traces, a->format));
                 },
                 [a] { check_model_source(a->src, true); }};
}

}  // namespace fsdpc::cli
