// fsdpc dump: run the compilation pipeline and print the trace after each
// requested pass, headed by its `# Constructed by <pass>` line.
#include <sstream>

#include "executors/claim.h"
#include "ir/error.h"
#include "passes/pipeline.h"
#include "passes/place.h"
#include "passes/stats.h"
#include "tools/cli_io.h"
#include "tools/commands.h"

namespace fsdpc::cli {

namespace {

struct DumpArgs {
  ModelSource src;
  ShardingArgs sharding;
  int world = 1, rank = 0;
  std::string stages = "del";
  bool no_sync = false, accumulate = false, stats = false;
  std::string format = "text", output, executor = "cpu", fusion = "none";
};

PipelineOptions pipeline_options(const DumpArgs& a, const CLI::App& cmd) {
  PipelineOptions o = sharding_pipeline(
      a.sharding, a.world, cmd.count("--world-size") ? "--world-size is " + std::to_string(a.world) : "");
  if (a.rank < 0 || a.rank >= o.mesh.world())
    fail("--rank ", a.rank, " is outside a world of ", o.mesh.world());
  o.sync_grads = !a.no_sync;
  o.accumulate_grads = a.accumulate;
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
        out.push_back(&s.traces[w == "forward" ? 0 : 1]);
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
  cmd->add_option("--stage", a->stages, "NAME[,NAME...] | all (see `fsdpc passes`; forward, backward; exec: claimed by --executor; fusion: exec with regions fused)")
      ->capture_default_str();
  cmd->add_option("--executor", a->executor, "Executors: cpu (CPU kernels + MPI) | cuda (CUDA kernels + NCCL, on cuda:0) | auto (cuda when a GPU is visible)")
      ->capture_default_str();
  cmd->add_option("--fusion", a->fusion, "none | auto (exec: fuse elementwise regions where the executor has a fusion executor)")
      ->check(CLI::IsMember({"none", "auto"}))
      ->capture_default_str();
  cmd->add_flag("--stats", a->stats, "Print collective counts, bytes per rank and peak live bytes");
  cmd->add_option("--format", a->format, "Output form")->check(CLI::IsMember(formats()))->capture_default_str();
  cmd->add_option("-o,--output", a->output, "Write to FILE instead of standard output");
  return Command{cmd,
                 [a, cmd] {
                   PipelineOptions o = pipeline_options(*a, *cmd);
                   const std::string executor = resolve_executor(a->executor);
                   executors_for(executor);  // an unknown name fails before compiling
                   // Every stage prints the tensors where they will live.
                   std::vector<Stage> stages =
                       compile(place(load_source_trace(a->src), executor_device(executor)), o);
                   // The execution traces: the final stage claimed by the executors.
                   const bool all = a->stages.find("all") != std::string::npos;
                   const Stage last = stages.back();
                   if (all || a->stages.find("exec") != std::string::npos)
                     stages.push_back({"exec", {execution_trace(last.traces[0], executor, a->fusion),
                                                execution_trace(last.traces[1], executor, a->fusion)}});
                   // The fused execution traces, whatever --fusion says; named
                   // only (`all` keeps printing what it printed before fusion).
                   if (a->stages.find("fusion") != std::string::npos)
                     stages.push_back({"fusion", {execution_trace(last.traces[0], executor, "auto"),
                                                  execution_trace(last.traces[1], executor, "auto")}});
                   std::vector<const Trace*> traces = select(stages, a->stages);
                   if (a->stats && a->format != "text" && a->format != "json")
                     fail("--stats prints text or json, not ", a->format);
                   write_output(a->output, a->stats ? render_stats(traces, a->format) : render_all(traces, a->format));
                 },
                 [a] { check_model_source(a->src, true); }};
}

}  // namespace fsdpc::cli
