// fsdpc dump: run the compilation pipeline and print the trace after each
// requested pass, headed by its `# Constructed by <pass>` line.
#include <sstream>

#include "executors/claim.h"
#include "ir/error.h"
#include "passes/pipeline.h"
#include "passes/stats.h"
#include "tools/cli_io.h"
#include "tools/commands.h"

namespace fsdpc::cli {

namespace {

struct DumpArgs {
  ModelSource src;
  int world = 1, rank = 0;
  std::string strategy = "zero3", mesh, wrap = "block", bucketing = "none", stages = "del";
  int prefetch = 1, max_inflight = 2;
  double bucket_mb = 25.0;
  bool no_sync = false, accumulate = false, stats = false;
  std::string format = "text", output, executor = "cpu";
};

PipelineOptions pipeline_options(const DumpArgs& a, const CLI::App& cmd) {
  PipelineOptions o;
  auto strategy = parse_strategy(a.strategy);
  FSDPC_CHECK(strategy) << "CLI11 admitted strategy " << a.strategy;
  o.strategy = *strategy;
  if (is_hybrid(o.strategy)) {
    if (a.mesh.empty()) fail("--strategy ", a.strategy, " needs --mesh R,S");
    o.mesh = parse_mesh(a.mesh);
    if (cmd.count("--world-size") && o.mesh.world() != a.world)
      fail("--mesh ", a.mesh, " has ", o.mesh.world(), " ranks but --world-size is ", a.world);
  } else {
    if (!a.mesh.empty()) fail("--mesh applies to hybrid strategies; ", a.strategy, " uses --world-size");
    o.mesh = flat_mesh(a.world);
  }
  if (a.rank < 0 || a.rank >= o.mesh.world())
    fail("--rank ", a.rank, " is outside a world of ", o.mesh.world());
  o.wrap = a.wrap;
  o.bucketing = a.bucketing == "unit";
  o.prefetch = a.prefetch;
  o.max_inflight = a.max_inflight;
  o.bucket_mb = a.bucket_mb;
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
  cmd->add_option("--world-size", a->world, "Number of ranks")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--rank", a->rank, "Rank whose traces to print (every rank runs the same traces)")
      ->capture_default_str();
  cmd->add_option("--strategy", a->strategy, "zero3 | zero2 | no_shard | hybrid | hybrid_zero2")
      ->check(CLI::IsMember({"zero3", "zero2", "no_shard", "hybrid", "hybrid_zero2"}))->capture_default_str();
  cmd->add_option("--mesh", a->mesh, "R,S: R replicas of S-way sharding (hybrid strategies)");
  cmd->add_option("--wrap", a->wrap, "FSDP units: block | size:N | none")->capture_default_str();
  cmd->add_option("--bucketing", a->bucketing, "none | unit")->check(CLI::IsMember({"none", "unit"}))
      ->capture_default_str();
  cmd->add_option("--prefetch", a->prefetch, "All_gathers issued K units ahead")->capture_default_str();
  cmd->add_option("--max-inflight", a->max_inflight, "At most M all_gathers outstanding")->capture_default_str();
  cmd->add_option("--bucket-mb", a->bucket_mb, "DDP gradient bucket size in MiB")->capture_default_str();
  cmd->add_flag("--no-sync", a->no_sync, "Gradient-accumulation micro-batch: no gradient synchronisation");
  cmd->add_flag("--accumulate", a->accumulate, "Add accumulated local gradients (acc_*) before synchronising");
  cmd->add_option("--stage", a->stages, "NAME[,NAME...] | all (see `fsdpc passes`; forward, backward; exec: claimed by --executor)")
      ->capture_default_str();
  cmd->add_option("--executor", a->executor, "Executors of the exec stage: cpu (CPU kernels + MPI) | cuda")
      ->capture_default_str();
  cmd->add_flag("--stats", a->stats, "Print collective counts, bytes per rank and peak live bytes");
  cmd->add_option("--format", a->format, "Output form")->check(CLI::IsMember(formats()))->capture_default_str();
  cmd->add_option("-o,--output", a->output, "Write to FILE instead of standard output");
  return Command{cmd,
                 [a, cmd] {
                   PipelineOptions o = pipeline_options(*a, *cmd);
                   std::vector<Stage> stages = compile(load_source_trace(a->src), o);
                   // The execution traces: the final stage claimed by the executors.
                   if (a->stages.find("exec") != std::string::npos || a->stages.find("all") != std::string::npos) {
                     std::vector<const Executor*> executors = executors_for(a->executor);
                     const Stage& last = stages.back();
                     stages.push_back({"exec", {claim(last.traces[0], executors), claim(last.traces[1], executors)}});
                   }
                   std::vector<const Trace*> traces = select(stages, a->stages);
                   if (a->stats && a->format != "text" && a->format != "json")
                     fail("--stats prints text or json, not ", a->format);
                   write_output(a->output, a->stats ? render_stats(traces, a->format) : render_all(traces, a->format));
                 },
                 [a] { check_model_source(a->src, true); }};
}

}  // namespace fsdpc::cli
