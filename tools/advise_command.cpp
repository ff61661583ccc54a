// fsdpc advise: the planner of runtime/planner/planner.h for a model and a
// world; with --measure, a few real steps of each candidate here beside the
// predictions (runtime/planner/measure.cpp).
#include <memory>

#include "ir/error.h"
#include "runtime/planner/planner.h"
#include "tools/cli_io.h"
#include "tools/commands.h"

namespace fsdpc::cli {

namespace {

struct AdviseArgs {
  ModelSource src;
  int world = 0, threads = 0, measure_steps = 0;  // 0: auto_measure_steps
  bool measure = false, sequence_parallel = false;
  std::vector<std::string> strategies;
  std::vector<int> tps{1}, pps{1};
  int micro_batches = 0;
  DilocoArgs diloco;  // --outer-steps H: DiLoCo candidates
  std::string gather_dtype = "param";  // int8: int8-gather candidates
  std::string mesh, hardware = "local", mem_cap, precision, executor, format = "text", output, loss_chunk = "auto";
};

// The model flags of `fsdpc train` that capture the trace advise compiled:
// train's --batch is the global one, advise's the per-rank one. The global
// batch is the same for every candidate, tp or not (AdviseSetup::tp_captured).
std::string train_model_flags(const ModelSource& src, const Trace& captured, int world) {
  std::string config = "'";  // for the shell, a ' in the path included
  for (char c : src.config) config += c == '\'' ? std::string("'\\''") : std::string(1, c);
  std::string f = src.model.empty() ? "--config " + config + "'" : "--model " + src.model;
  if (captured.args.empty() || captured.args[0].type.shape.empty()) return f;
  const TensorType& x = captured.args[0].type;
  f += " --batch " + std::to_string(x.shape[0] * world);
  const bool ids = x.dtype == DType::i64 || x.dtype == DType::i32;
  if (src.seq) f += " --seq " + std::to_string(src.seq);
  else if (ids && x.shape.size() >= 2) f += " --seq " + std::to_string(x.shape[1]);
  return f;
}

void run_advise(const AdviseArgs& a) {
  PlanRequest r;
  r.world = a.world;
  if (!a.mesh.empty()) r.mesh = parse_mesh(a.mesh);
  r.hardware = a.hardware;
  if (!a.mem_cap.empty()) r.mem_cap = parse_mem_cap(a.mem_cap);
  if (!a.precision.empty()) r.precision = parse_dtype(a.precision);  // CLI11 admitted f32 and bf16 only
  if (!a.executor.empty()) r.executor = parse_target(a.executor);  // CLI11 admitted cpu and cuda only
  r.strategies = a.strategies;
  r.tps = a.tps;
  r.pps = a.pps;
  r.micro_batches = a.micro_batches;
  r.sequence_parallel = a.sequence_parallel;
  r.tensor_parallel_plan = source_tensor_parallel_plan(a.src);
  r.loss_chunk = parse_loss_chunk(a.loss_chunk);
  r.diloco = a.diloco.options();
  r.int8_gathers = a.gather_dtype == "int8";
  r.threads = a.threads;
  const std::string mpirun = a.measure ? find_mpirun() : "";
  if (a.measure && mpirun.empty())
    fail("--measure runs each candidate under mpirun, and none was found (not on PATH; FSDPC_MPIRUN names one)");
  Plan plan = plan_training(r, [&](int64_t batch) {
    ModelSource src = a.src;
    if (batch) src.batch = batch;
    return load_source_trace(src);
  });
  if (a.measure)
    measure_candidates(plan.setup, mpirun,
                       train_model_flags(a.src, plan.setup.captured, a.world) + " --loss-chunk " + a.loss_chunk,
                       a.measure_steps, plan.candidates);
  const std::string model = a.src.model.empty() ? a.src.config : a.src.model;
  write_output(a.output, a.format == "json" ? plan_json(plan, model, a.measure) : plan_table(plan, model, a.measure));
}

}  // namespace

Command add_advise_command(CLI::App& app) {
  auto a = std::make_shared<AdviseArgs>();
  CLI::App* cmd = app.add_subcommand(
      "advise",
      "Compile every strategy for N ranks and rank them by predicted step time and peak memory (--measure: and run each)");
  add_model_options(cmd, a->src, /*allow_trace_file=*/false);
  cmd->add_option("--world-size", a->world, "Number of ranks")->required()->check(whole_number(1));
  cmd->add_option("--mesh", a->mesh, "R,S: the hybrid strategies on this mesh only (default: every R x S = N, R, S > 1)");
  add_loss_chunk_option(cmd, a->loss_chunk);
  add_diloco_options(cmd, a->diloco);
  cmd->add_option("--gather-dtype", a->gather_dtype,
                  "param | int8: every sharded strategy also with its parameters gathered as int8 codes (unit buckets, "
                  "prefetch 1), and the link between nodes from which each keeps 90% of its speed")
      ->check(CLI::IsMember({"param", "int8"}))
      ->capture_default_str();
  cmd->add_option("--hardware", a->hardware,
                  "local (this host, measured and cached) | a profile name (hardware/NAME.json) | a .json file")
      ->capture_default_str();
  cmd->add_option("--mem-cap", a->mem_cap, "Per-rank memory cap, e.g. 80G (default: the profile's memory capacity)");
  cmd->add_option("--precision", a->precision, "f32 | bf16 (default: the profile's)")->check(CLI::IsMember({"f32", "bf16"}));
  cmd->add_option("--executor", a->executor, "cpu | cuda: what the candidates compile for (default: the profile's)")
      ->check(CLI::IsMember(target_names()));
  cmd->add_option("--strategies", a->strategies, "Only these strategies, e.g. zero3,no_shard (default: all)")
      ->delimiter(',');
  cmd->add_option("--tp", a->tps,
                  "Tensor-parallel sizes to compile every strategy at, e.g. 1,2,4 (each must divide --world-size; "
                  "default 1: none)")
      ->delimiter(',');
  cmd->add_option("--pp", a->pps,
                  "Pipeline sizes to compile zero3, zero2 and no_shard at, e.g. 1,2,4 (stages of world / (P x T) "
                  "ranks, 1F1B; default 1: none)")
      ->delimiter(',');
  cmd->add_option("--micro-batches", a->micro_batches,
                  "Micro-batches a step of each --pp candidate (default: the most up to 4P that divide a stage "
                  "rank's rows)")
      ->check(whole_number(1));
  cmd->add_flag("--sequence-parallel", a->sequence_parallel,
                "Also compile every --tp candidate above 1 with sequence parallelism (rows '... sp')");
  auto* measure = cmd->add_flag("--measure", a->measure,
                                "Also run each candidate that fits here (mpirun -np N fsdpc train) and print measured "
                                "step time and peak beside the predicted");
  cmd->add_option("--measure-steps", a->measure_steps,
                  "Steps each --measure run trains, one run a candidate; the first (and in a run of 4 or more the "
                  "second) is left out of the time (default: about a second of steps by the predicted step time, "
                  "5 to 1000, in three rounds over the candidates)")
      ->check(whole_number(1, 100000))
      ->needs(measure);
  cmd->add_option("--threads", a->threads, "Candidates compiled at once (default: the cores)")->check(whole_number(1, 256));
  cmd->add_option("--format", a->format, "Output form")->check(CLI::IsMember({"text", "json"}))->capture_default_str();
  cmd->add_option("-o,--output", a->output, "Write to FILE instead of standard output");
  return Command{cmd, [a] { run_advise(*a); }, [a] { check_model_source(a->src, false); }};
}

}  // namespace fsdpc::cli
