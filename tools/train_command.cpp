// fsdpc train: the flags of the library's Trainer (frontend/trainer/
// trainer.h), on every rank of `mpirun -np N fsdpc train` (a world of one
// without mpirun).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>

#include "executors/comm/mpi_world.h"
#include "frontend/models/registry.h"
#include "frontend/trainer/trainer.h"
#include "runtime/pipeline_schedule.h"
#include "runtime/reliability/preemption.h"
#include "tools/cli_io.h"
#include "tools/commands.h"

namespace fsdpc::cli {

namespace {

// The flags: those with a type of their own bind to the options directly;
// names and sizes are parsed by train_options().
struct TrainFlags {
  TrainOptions o;
  ModelSource src;
  ShardingArgs sharding;
  OptimizerArgs optimizer;
  std::string data_dtype = "auto", sampling = "sequential";
  std::string checkpoint = "full", mem_cap, save_shard_size, timeout;
  std::string executor{target_request_name(request_of(EngineOptions{}.target))};
  std::string fusion{fusion_mode_name(EngineOptions{}.fusion)};
  // --executor resolved once (`auto` asks the CUDA runtime), for the check
  // before MPI starts and the run alike.
  std::optional<Target> target;
};

// The options the flags say; fsdpc::Error (exit 2) for a bad size or time.
// CLI11 admitted only the names its checks list.
TrainOptions train_options(TrainFlags& f) {
  TrainOptions o = f.o;
  if (!f.target) f.target = resolve_target(parse_executor(f.executor));
  o.engine.target = *f.target;
  o.engine.fusion = parse_fusion(f.fusion);
  o.model = f.src.model;
  o.config = f.src.config;
  o.batch = f.src.batch;
  o.seq = f.src.seq;
  o.layout = [sharding = f.sharding](int world) {
    return sharding_pipeline(sharding, world, "mpirun started " + std::to_string(world));
  };
  apply_optimizer_names(f.optimizer, o.engine);
  o.engine.pp_schedule = *parse_pipeline_schedule(f.sharding.pp_schedule);
  if (!f.mem_cap.empty()) o.engine.mem_cap = parse_mem_cap(f.mem_cap);
  o.data_dtype = *parse_token_dtype(f.data_dtype);
  o.sampling = *parse_sampling(f.sampling);
  o.checkpoint = *parse_checkpoint_kind(f.checkpoint);
  if (!f.save_shard_size.empty()) o.save_shard_bytes = parse_byte_size("--save-shard-size", f.save_shard_size);
  if (!f.timeout.empty()) o.timeout_s = parse_timeout_seconds(f.timeout, "--timeout");
  return o;
}

void run_train(TrainFlags& f) {
  Trainer trainer(train_options(f));
  const TrainResult r = trainer.run();
  if (r.stop_signal && !r.saved) {  // the steps are lost: a failure, as the signal's default action would report it
    if (mpi_world_rank() == 0)
      std::fprintf(stderr, "fsdpc: stopped at step %lld by %s; nothing was saved (no --save DIR)\n",
                   static_cast<long long>(r.end_step), stop_signal_name(r.stop_signal));
    std::fflush(stderr);
    std::exit(128 + r.stop_signal);  // MPI_Finalize runs at exit, on every rank
  }
}

}  // namespace

Command add_train_command(CLI::App& app) {
  auto f = std::make_shared<TrainFlags>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model sharded over the ranks of mpirun (a world of 1 without it)");
  add_model_options(cmd, f->src, /*allow_trace_file=*/false);
  add_sharding_options(cmd, f->sharding);
  add_target_options(cmd, f->executor, f->fusion);
  cmd->add_option("--steps", f->o.steps, "Optimizer steps")->check(whole_number(1))->capture_default_str();
  add_optimizer_options(cmd, f->o.engine, f->optimizer);
  cmd->add_option("--grad-accum", f->o.engine.grad_accum, "Micro-batches per step")->check(whole_number(1))
      ->capture_default_str();
  cmd->add_flag("--no-sync", f->o.engine.no_sync, "With --grad-accum: synchronise gradients on the last micro-batch only");
  cmd->add_flag("--keep-gathered", f->o.engine.keep_gathered,
                "Gather each parameter once per step and keep it whole across the --grad-accum micro-batches (and "
                "--pp stages' micro-batches), reducing each gradient once after the last: fewer collectives, the "
                "memory of whole parameters and gradients (PyTorch FSDP's reshard_after_backward=False with no_sync)");
  cmd->add_option("--seed", f->o.engine.seed, "Seed of initialisation and data")->capture_default_str();
  cmd->add_option("--mem-cap", f->mem_cap, "Per-rank memory cap, e.g. 512M");
  cmd->add_option("--init", f->o.init, "Hugging Face weights (" + supported_architectures_text() + "): a .safetensors file or a folder")
      ->check(CLI::ExistingPath);
  cmd->add_option("--data", f->o.data,
                  "Training tokens: a flat file of little-endian ids, as --data-dtype says (by default a .bin of "
                  "uint16 ids as nanoGPT writes, a .u32 of uint32 ids, any other file as bytes)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--val-data", f->o.val_data, "Validation tokens, same formats")->check(CLI::ExistingFile);
  cmd->add_option("--data-dtype", f->data_dtype,
                  "auto | uint8 | uint16 | uint32: the ids of --data and --val-data (auto: .bin uint16, .u32 "
                  "uint32, else bytes); uint32 for vocabularies above 65536 (Llama 3, Qwen2)")
      ->check(CLI::IsMember({"auto", "uint8", "uint16", "uint32"}))->capture_default_str();
  cmd->add_option("--eval-every", f->o.eval_every,
                  "Validation loss every K steps and after the last (needs --val-data; default: after the last "
                  "step only; 0: never)")
      ->check(whole_number(0));
  cmd->add_option("--eval-batches", f->o.eval_batches, "Validation batches per evaluation")
      ->check(whole_number(1))->capture_default_str();
  cmd->add_option("--sampling", f->sampling, "sequential | random windows of --data")
      ->check(CLI::IsMember({"sequential", "random"}))->capture_default_str();
  cmd->add_option("--resume", f->o.resume, "Continue from the latest checkpoint --save wrote in DIR")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--save", f->o.save, "Write model.safetensors and config.json (Hugging Face) into DIR");
  cmd->add_option("--checkpoint", f->checkpoint,
                  "full: the Hugging Face export plus each rank's state; sharded: each rank's state only")
      ->check(CLI::IsMember({"full", "sharded"}))->capture_default_str();
  cmd->add_option("--save-shard-size", f->save_shard_size,
                  "Largest Hugging Face weight file of --save (B, K, M, G: powers of 1024); above it, "
                  "model-0000K-of-0000N.safetensors and an index (default 5000000000, Hugging Face's 5GB)");
  cmd->add_option("--save-every", f->o.save_every, "Also save every K steps (0: only at the end)")
      ->check(whole_number(0))->capture_default_str();
  cmd->add_option("--log-every", f->o.log_every, "Print every K steps (and evaluations)")->check(whole_number(1))
      ->capture_default_str();
  cmd->add_option("--log-json", f->o.log_json,
                  "Write one JSON line per step (rank 0): step, loss, grad_norm, lr, step_ms, tokens_per_s, "
                  "steps_done, steps_total, elapsed_s, eta_s, peak_bytes, predicted_peak_bytes (the memory plan's), "
                  "reserved_bytes (and val_loss, collectives)");
  cmd->add_option("--save-state", f->o.save_state, "Write the gathered parameters as JSON (rank 0)");
  // --batch from the model options is the GLOBAL batch here.
  cmd->add_option("--timeout", f->timeout,
                  "Seconds any rank waits for a collective before the job is aborted (exit 4) with the "
                  "collective named and the flight recorder written (default: FSDPC_TIMEOUT_S, else 600)");
  cmd->add_option("--profile", f->o.profile,
                  "Write the step timeline of every rank to FILE as Chrome trace-event JSON (open it in "
                  "Perfetto or chrome://tracing): kernels, collectives from issue to completion, "
                  "time blocked in waits, live memory; and print the step breakdown at the end (cpu executor)");
  cmd->add_option("--profile-steps", f->o.profile_steps,
                  "With --profile: record steps A to B-1, numbered as the log prints them (default: the two "
                  "steps after the first, 1:3)");
  cmd->add_option("--flight-dir", f->o.flight_dir,
                  "Where each rank writes flight-rank{R}.json (on a timeout, a fatal error or SIGUSR1; default: "
                  "FSDPC_FLIGHT_DIR, else the --save folder, else ./fsdpc-flight)");
  // Every check that needs no rank, before MPI starts: one message, exit 2.
  return Command{cmd, [f] { run_train(*f); }, [f] { check_train_options(train_options(*f)); }};
}

}  // namespace fsdpc::cli
