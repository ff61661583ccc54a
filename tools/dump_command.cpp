// fsdpc dump: the flags of the library's dump (runtime/dump.h), which runs
// the compilation pipeline and prints the trace after each requested pass,
// headed by its `# Constructed by <pass>` line.
#include "frontend/models/registry.h"
#include "ir/error.h"
#include "passes/render.h"
#include "runtime/dump.h"
#include "tools/cli_io.h"
#include "tools/commands.h"

namespace fsdpc::cli {

namespace {

// The flags: those with a type of their own bind to the options directly;
// the layout, the rank and names are turned into options by dump_options().
struct DumpArgs {
  DumpOptions o;
  ModelSource src;
  ShardingArgs sharding;
  int world = 1, rank = 0;
  std::string output, optimizer = "adamw";
  // --executor and --fusion as typed (parse_executor, parse_fusion).
  std::string executor{target_request_name(TargetRequest::cpu)}, fusion{fusion_mode_name(FusionMode::automatic)};
};

DumpOptions dump_options(const DumpArgs& a, const CLI::App& cmd) {
  DumpOptions o = a.o;
  o.pipeline = sharding_pipeline(
      a.sharding, a.world, cmd.count("--world-size") ? "--world-size is " + std::to_string(a.world) : "");
  if (a.rank < 0 || a.rank >= o.pipeline.mesh.world() * o.pipeline.pp)
    fail("--rank ", a.rank, " is outside a world of ", o.pipeline.mesh.world() * o.pipeline.pp);
  o.pp_schedule = *parse_pipeline_schedule(a.sharding.pp_schedule);  // CLI11 admitted only the names
  o.optimizer = *parse_optimizer_kind(a.optimizer);
  o.target = resolve_target(parse_executor(a.executor));  // auto is resolved here, once
  o.fusion = parse_fusion(a.fusion);
  o.pipeline.tensor_parallel_plan = source_tensor_parallel_plan(a.src);
  return o;
}

// --memory --grad-accum K: the model captured at a micro-batch, batch / K rows.
ModelSource micro_batch_source(ModelSource src, int grad_accum) {
  if (grad_accum == 1) return src;
  if (!src.trace_file.empty()) fail("--grad-accum ", grad_accum, " re-captures the model; a --trace file has its shapes");
  std::unique_ptr<Model> model = src.config.empty() ? make_model(src.model) : make_model_from_config(src.config);
  CaptureOptions co;
  if (src.seq) co.seq = src.seq;
  const int64_t batch = src.batch ? src.batch : model->inputs(co).at(0).shape.at(0);
  if (batch % grad_accum != 0)
    fail("--grad-accum ", grad_accum, ": the per-rank batch ", batch, " does not split into equal micro-batches");
  src.batch = batch / grad_accum;
  return src;
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
  cmd->add_flag("--no-sync", a->o.no_sync, "Gradient-accumulation micro-batch: no gradient synchronisation");
  cmd->add_flag("--accumulate", a->o.accumulate, "Add accumulated local gradients (acc_*) before synchronising");
  cmd->add_flag("--keep-gathered", a->o.keep_gathered,
                "As fsdpc train --keep-gathered: the passes of the micro-batches on whole parameters, and stage "
                "gather_once (the step's gather and reduce traces)");
  cmd->add_option("--stage", a->o.stages, "NAME[,NAME...] | all (see `fsdpc passes`; forward, backward; exec: claimed by --executor; fusion: exec with regions fused)")
      ->capture_default_str();
  add_target_options(cmd, a->executor, a->fusion);
  cmd->add_flag("--stats", a->o.stats, "Print collective counts, bytes per rank and peak live bytes");
  cmd->add_flag("--memory", a->o.memory,
                "Print the memory plan of one training step per rank: live bytes by category at every statement, "
                "the peak and where it occurs (--grad-accum, --no-sync, --optimizer, --momentum as fsdpc train; "
                "--batch per rank)");
  cmd->add_option("--grad-accum", a->o.grad_accum, "With --memory: micro-batches per step")
      ->check(whole_number(1))->capture_default_str();
  cmd->add_option("--optimizer", a->optimizer, "With --memory: adamw | sgd")
      ->check(CLI::IsMember({"adamw", "sgd"}))->capture_default_str();
  cmd->add_option("--momentum", a->o.momentum, "With --memory: SGD momentum (0: no momentum buffer)")
      ->check(real_number(0, true, 1, true))->capture_default_str();
  cmd->add_option("--format", a->o.format, "Output form")->check(CLI::IsMember(trace_formats()))->capture_default_str();
  cmd->add_option("-o,--output", a->output, "Write to FILE instead of standard output");
  return Command{cmd,
                 [a, cmd] {
                   const DumpOptions o = dump_options(*a, *cmd);
                   check_dump_options(o);  // before --memory --grad-accum captures a micro-batch
                   const ModelSource src = o.memory ? micro_batch_source(a->src, o.grad_accum) : a->src;
                   write_output(a->output, dump(load_source_trace(src), o));
                 },
                 [a] { check_model_source(a->src, true); }};
}

}  // namespace fsdpc::cli
