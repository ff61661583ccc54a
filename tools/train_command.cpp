// fsdpc train: sharded training on every rank of `mpirun -np N fsdpc train`.
// The global batch of each step is split across the data-parallel ranks
// (each its contiguous slice, DistributedSampler semantics); the logged loss
// is the mean over the global batch, printed by rank 0 only, with the
// learning rate, progress and an ETA; a summary line ends the run.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "executors/claim.h"
#include "executors/comm/mpi_world.h"
#include "executors/cpu/cpu_executor.h"
#include "executors/fusion/fusion_kernel.h"
#ifdef FSDPC_HAVE_CUDA
#include "executors/fusion/nvrtc_compiler.h"
#endif
#include "frontend/language_model.h"
#include "frontend/hf_checkpoint.h"
#include "frontend/jit.h"
#include "frontend/models.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "runtime/reliability/consistency.h"
#include "runtime/data.h"
#include "runtime/io/integrity.h"
#include "runtime/planner/memory_plan.h"
#include "runtime/reliability/preemption.h"
#include "runtime/io/sha256.h"
#include "runtime/io/token_data.h"
#include "runtime/reliability/watchdog.h"
#include "tools/cli_io.h"
#include "tools/commands.h"
#include "tools/train_args.h"
#include "tools/train_checkpoint.h"
#include "tools/train_fingerprint.h"
#include "tools/train_profile.h"

namespace fsdpc::cli {

namespace {


LrSchedule lr_schedule(const TrainArgs& a) {
  LrSchedule s;
  s.kind = *parse_lr_schedule(a.lr_schedule);  // CLI11 admitted only the names
  s.warmup_steps = a.warmup_steps;
  s.decay_steps = a.decay_steps > 0 ? a.decay_steps : a.steps;
  s.min_lr = a.min_lr;
  return s;
}

JitOptions jit_options(const TrainArgs& a, int world, bool is_lm) {
  JitOptions o;
  o.pipeline = sharding_pipeline(a.sharding, world, "mpirun started " + std::to_string(world));
  o.pipeline.verify = false;  // verified by the tests; training runs the passes only
  // Tensor-parallel ranks share their batch: it is split over the dp ranks.
  const int dp = o.pipeline.mesh.data_parallel();
  int64_t batch = a.src.batch ? a.src.batch : (is_lm ? 2 * dp : 64);  // global
  if (batch % dp != 0) fail("--batch ", batch, " must be divisible by the ", dp, " data-parallel ranks");
  o.capture.batch = batch / dp;
  if (a.src.seq) o.capture.seq = a.src.seq;
  o.mean_square_loss = !is_lm;
  o.engine.optimizer.kind = a.optimizer == "sgd" ? OptimizerOptions::Kind::sgd : OptimizerOptions::Kind::adamw;
  o.engine.optimizer.lr = a.lr;
  o.engine.optimizer.weight_decay = a.weight_decay;
  o.engine.optimizer.momentum = a.momentum;
  o.engine.optimizer.beta1 = a.beta1;
  o.engine.optimizer.beta2 = a.beta2;
  o.engine.optimizer.eps = a.eps;
  o.engine.lr_schedule = lr_schedule(a);
  o.engine.clip = a.clip;
  o.engine.grad_accum = a.grad_accum;
  o.engine.pp_schedule = *parse_pipeline_schedule(a.sharding.pp_schedule);  // CLI11 admitted only the names
  o.engine.no_sync = a.no_sync;
  o.engine.keep_gathered = a.keep_gathered;
  o.engine.seed = a.seed;
  o.engine.executor = a.executor;
  o.engine.fusion = a.fusion;
  if (!a.mem_cap.empty()) o.engine.mem_cap = parse_mem_cap(a.mem_cap);
  return o;
}

// Where a run stands after a step: for the log line and the JSON record.
struct Progress {
  int64_t done = 0, total = 0;  // steps done, counting those before a resume
  double elapsed_s = 0, eta_s = 0;  // this process's time; ETA at its mean step time
};

// "850ms", "42.0s", "3m07s", "2h05m": short enough for every log line.
std::string format_duration(double s) {
  char buf[32];
  if (s < 1) std::snprintf(buf, sizeof buf, "%.0fms", s * 1e3);
  else if (s < 60) std::snprintf(buf, sizeof buf, "%.1fs", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  else std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s / 3600), static_cast<int>(s / 60) % 60);
  return buf;
}

// The printed validation loss, rounded like the training loss (any magnitude).
std::string format_val_loss(double loss) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "  val %.4f", loss);
  return buf;
}

std::string step_json(int64_t step, const StepResult& r, double tokens_per_s, const MemStats& m, const Progress& p) {
  std::ostringstream js;
  js.precision(9);
  js << "{\"step\": " << step << ", \"loss\": " << r.loss << ", \"grad_norm\": " << r.grad_norm
     << ", \"lr\": " << r.lr << ", \"step_ms\": " << r.seconds * 1e3 << ", \"tokens_per_s\": " << tokens_per_s
     << ", \"steps_done\": " << p.done << ", \"steps_total\": " << p.total << ", \"elapsed_s\": " << p.elapsed_s
     << ", \"eta_s\": " << p.eta_s << ", \"peak_bytes\": {";
  for (size_t c = 0; c < kNumMemCategories; ++c)
    js << (c ? ", " : "") << "\"" << mem_category_name(static_cast<MemCategory>(c)) << "\": " << m.peak[c];
  js << ", \"total\": " << m.total_peak << "}";
  if (!r.collectives.empty()) {  // device time per kind, where measured
    js << ", \"collectives\": {";
    for (size_t i = 0; i < r.collectives.size(); ++i) {
      const CollectiveTime& c = r.collectives[i];
      js << (i ? ", " : "") << "\"" << c.kind << "\": {\"count\": " << c.count << ", \"bytes\": " << c.bytes
         << ", \"ms\": " << c.ms << "}";
    }
    js << "}";
  }
  js << "}";
  return js.str();
}

std::unique_ptr<Model> make_train_model(const TrainArgs& a, const HfWeights* init) {
  if (!a.src.config.empty()) return make_model_from_config(a.src.config);
  if (!a.src.model.empty()) return make_model(a.src.model);
  if (init && !init->config_path().empty()) return make_model_from_config(init->config_path());
  const std::string resumed = a.resume + "/config.json";
  if (!a.resume.empty() && std::filesystem::exists(resumed)) return make_model_from_config(resumed);
  fail(a.init.empty() ? "--resume " + a.resume : "--init " + a.init,
       ": no config.json beside the weights; pass --config or --model");
}

int64_t save_shard_bytes(const TrainArgs& a) {
  return a.save_shard_size.empty() ? kDefaultHfShardBytes : parse_byte_size("--save-shard-size", a.save_shard_size);
}

// The mean validation loss over `batches` sequential windows of the file.
double validation_loss(Compiled& compiled, const TokenData& val, int batches, int world, int rank, int64_t micro) {
  double sum = 0;
  for (int b = 0; b < batches; ++b) {
    Shape s{micro, val.seq()};
    std::vector<int64_t> idx(static_cast<size_t>(numel(s))), targets(idx.size());
    val.batch(b, rank, world, micro * world, idx.data(), targets.data());
    // A pipeline stage before the last returns its activation: ignored.
    sum += compiled.forward({HostTensor::ints(s, std::move(idx)), HostTensor::ints(s, std::move(targets))})[0].f32[0];
  }
  return compiled.engine().mean_over_ranks(sum / batches);
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "a signal";
  }
}

// What runs where, before the first step (rank 0): the model and world, the
// CPU threads each rank got, and the optimizer with its schedule.
void print_header(const TrainArgs& a, const Model& model, const JitOptions& o, int world, int64_t first_step) {
  const EngineOptions& e = o.engine;
  std::string executor = resolve_executor(a.executor);
  if (executor == "cpu") {
    const int t = cpu_threads();
    executor = "cpu: " + std::to_string(t) + " thread" + (t == 1 ? "" : "s") + " per rank; " + cpu_backend_info();
  }
  const int tp = o.pipeline.mesh.tp, pp = o.pipeline.pp;
  std::string layout = tp > 1 ? a.sharding.strategy + " on " + std::to_string(world / pp / tp) +
                                    " data-parallel ranks x tp " + std::to_string(tp)
                              : a.sharding.strategy;
  if (pp > 1)
    layout += " x pp " + std::to_string(pp) + " (" + a.sharding.pp_schedule + ", " + std::to_string(a.grad_accum) +
              " micro-batches)";
  if (a.keep_gathered) layout += ", parameters gathered once a step";
  std::printf("train %s: %d rank%s, %s, executor %s\n", model.name().c_str(), world, world == 1 ? "" : "s",
              layout.c_str(), executor.c_str());
  std::ostringstream opt;
  opt << a.optimizer << " lr " << a.lr;
  if (e.optimizer.kind == OptimizerOptions::Kind::adamw)
    opt << ", betas (" << a.beta1 << ", " << a.beta2 << "), eps " << a.eps;
  else if (a.momentum != 0)
    opt << ", momentum " << a.momentum;
  opt << ", weight decay " << a.weight_decay << "; schedule " << a.lr_schedule;
  if (a.warmup_steps > 0) opt << ", warmup " << a.warmup_steps << " steps";
  if (e.lr_schedule.kind != LrSchedule::Kind::constant)
    opt << ", decay to " << a.min_lr << " by step " << e.lr_schedule.decay_steps;
  std::printf("  %s; steps %lld to %d\n", opt.str().c_str(), static_cast<long long>(first_step), a.steps);
  std::fflush(stdout);
}

// --timeout, else FSDPC_TIMEOUT_S (or FSDPC_NCCL_TIMEOUT_S), else 600 s.
double train_timeout(const TrainArgs& a) {
  return a.timeout.empty() ? collective_timeout() : parse_timeout_seconds(a.timeout, "--timeout");
}

// --flight-dir, else FSDPC_FLIGHT_DIR, else the --save folder, else ./fsdpc-flight.
std::string flight_dir(const TrainArgs& a) {
  if (!a.flight_dir.empty()) return a.flight_dir;
  if (const char* env = std::getenv("FSDPC_FLIGHT_DIR"); env && *env) return env;
  return a.save.empty() ? "fsdpc-flight" : a.save;
}

void run_train(const TrainArgs& a) {
  mpi_init();
  install_stop_handlers();
  const int world = mpi_world_size(), rank = mpi_world_rank();
  Watchdog& watchdog = install_watchdog({train_timeout(a), flight_dir(a), rank, world});
  std::unique_ptr<HfWeights> init;
  std::unique_ptr<Model> model;
  const LanguageModel* lm = nullptr;
  JitOptions o;
  std::unique_ptr<Compiled> compiled;
  LaunchFingerprint fingerprint;
  const Sampling sampling = a.sampling == "random" ? Sampling::random : Sampling::sequential;
  std::unique_ptr<TokenData> data, val;
  MemoryPlan plan;  // what each step will hold, from the traces, before any step runs
  bool checked = false;
  // Until every rank has compared what it runs (in jit(), before the engine
  // builds anything collective), an error on one rank is reported through
  // the same exchange, so every rank stops with one message and no abort.
  try {
    if (!a.init.empty() && !a.resume.empty()) fail("--init and --resume exclude each other");
    save_shard_bytes(a);  // a bad --save-shard-size fails before training, not at the first save
    init = a.init.empty() ? nullptr : std::make_unique<HfWeights>(a.init);
    model = make_train_model(a, init.get());
    lm = dynamic_cast<const LanguageModel*>(model.get());
    if (!lm && (init || !a.data.empty() || !a.save.empty()))
      fail("--init, --data and --save apply to language models (GPT-2, Llama); ", model->name(),
           " trains on synthetic features");
    o = jit_options(a, world, lm != nullptr);
    if (lm) {  // a bad token file stops every rank with one message, before anything is compiled
      const int64_t seq = model->inputs(o.capture)[0].shape[1], vocab = lm->vocab_size();
      const TokenDtype dtype = *parse_token_dtype(a.data_dtype);  // CLI11 admitted only the names
      if (!a.data.empty()) data = std::make_unique<TokenData>(a.data, vocab, seq, sampling, a.seed, dtype);
      if (!a.val_data.empty())
        val = std::make_unique<TokenData>(a.val_data, vocab, seq, Sampling::sequential, 0, dtype);
    }
    fingerprint = launch_fingerprint(a, o, *model, world);
    o.engine.before_collectives = [&](const EngineTraces& traces) {
      add_traces(fingerprint, traces);
      checked = true;
      if (const std::string d = launch_disagreement(fingerprint); !d.empty()) exit_all_ranks(2, d);
      EngineOptions planned = o.engine;
      planned.executor = resolve_executor(a.executor);
      planned.mesh = o.pipeline.mesh;
      planned.mesh.pp = o.pipeline.pp;
      if (o.pipeline.pp == 1) {
        plan = plan_memory(traces, planned);  // every rank plans the same traces: all refuse, or none
        if (o.engine.mem_cap)
          if (const std::string r = mem_cap_refusal(plan, *o.engine.mem_cap); !r.empty()) exit_all_ranks(2, r);
        return;
      }
      // Each pipeline stage plans its own traces; the first rank refusing
      // (by stage) speaks for all, through the same exchange as the check.
      const int stage = rank / (world / o.pipeline.pp);
      plan = plan_memory(traces, planned, stage);
      LaunchFingerprint refused;
      if (o.engine.mem_cap)
        if (const std::string r = mem_cap_refusal(plan, *o.engine.mem_cap); !r.empty())
          refused.set_error("pipeline stage " + std::to_string(stage) + ": " + r);
      if (const std::string d = launch_disagreement(refused); !d.empty()) exit_all_ranks(2, d);
    };
    compiled = jit(*model, o);
  } catch (const std::exception& e) {
    if (checked) throw;
    LaunchFingerprint failed;
    failed.set_error(e.what());
    exit_all_ranks(2, launch_disagreement(failed));
  }
  int64_t first_step = 0;
  if (!a.resume.empty()) {
    first_step = resume_checkpoint(compiled->engine(), a.resume);
  } else if (init) {
    verify_init(a.init);
    load_hf_weights(compiled->engine(), *lm, *init);
  }

  std::ofstream log;
  if (rank == 0 && !a.log_json.empty()) {
    log.open(a.log_json, std::ios::trunc);
    if (!log) fail(a.log_json, ": cannot open for writing");
  }
  const int64_t b_local = *o.capture.batch;
  std::vector<ModelInput> shapes = model->inputs(o.capture);
  const int64_t vocab = lm ? lm->vocab_size() : 1;
  SyntheticTokens tokens(a.seed, vocab);
  if (rank == 0) print_header(a, *model, o, world, first_step);
  TrainProfile profile(a, first_step, model->name() + ", " + a.sharding.strategy + ", " + std::to_string(world) + " ranks");
  const auto started = std::chrono::steady_clock::now();
  double step_seconds = 0;  // the steps alone, for the mean throughput
  int64_t tokens_seen = 0;
  std::optional<std::pair<double, int64_t>> best_val;  // (loss, step)
  int64_t last_saved = a.resume.empty() ? -1 : first_step;  // the step a checkpoint continues from
  int stop = 0;  // the signal that stopped the run
  bool memory_shown = false;  // predicted beside measured, at the first printed step
  int64_t stopped_at = 0;
  // The batch is split over the data-parallel ranks; the ranks of a
  // tensor-parallel group (adjacent) read the same part of it.
  // With pipeline stages, the ranks at one place in every stage read the
  // same batch too (stage 0 its ids, the last stage its targets).
  const int tp = o.pipeline.mesh.tp, stage_world = world / o.pipeline.pp;
  const int data_ranks = stage_world / tp, data_rank = rank % stage_world / tp;
  for (int64_t step = first_step; step < a.steps; ++step) {
    watchdog.safe_point();  // a SIGUSR1 between steps
    if ((stop = agree_on_stop()) != 0) {  // every rank, at the same step
      stopped_at = step;
      break;
    }
    std::vector<HostTensor> batch;
    int64_t tokens_in_batch = 0;
    const Shape& s = shapes[0].shape;
    if (lm) {
      std::vector<int64_t> idx(static_cast<size_t>(numel(s))), targets(idx.size());
      if (data) data->batch(step, data_rank, data_ranks, b_local * data_ranks, idx.data(), targets.data());
      else tokens.batch(step, data_rank, data_ranks, b_local, s[1], idx.data(), targets.data());
      batch = {HostTensor::ints(s, std::move(idx)), HostTensor::ints(s, std::move(targets))};
      tokens_in_batch = numel(s) * data_ranks;
    } else {
      std::vector<float> x(static_cast<size_t>(numel(s)));
      synthetic_features(a.seed, step, data_rank, data_ranks, b_local, numel(s) / b_local, x.data());
      batch = {HostTensor::floats(s, std::move(x))};
      tokens_in_batch = b_local * data_ranks;
    }
    compiled->engine().reset_peak_memory();
    profile.before_step(compiled->engine(), step);
    StepResult r = compiled->train_step(batch);
    profile.after_step(compiled->engine(), step);
    // Unset --eval-every with --val-data evaluates once, after the last step.
    const bool eval = val && a.eval_every != 0 &&
                      ((a.eval_every > 0 && (step + 1) % a.eval_every == 0) || step + 1 == a.steps);
    const double val_loss = eval ? validation_loss(*compiled, *val, a.eval_batches, data_ranks, data_rank, b_local / a.grad_accum) : 0;
    if (!a.save.empty() && ((a.save_every > 0 && (step + 1) % a.save_every == 0) || step + 1 == a.steps)) {
      save_checkpoint(compiled->engine(), *lm, a.save, step + 1, a.checkpoint == "full", save_shard_bytes(a));
      last_saved = step + 1;
    }
    if (rank != 0) continue;
    step_seconds += r.seconds;
    tokens_seen += tokens_in_batch;
    if (eval && (!best_val || val_loss < best_val->first)) best_val = {val_loss, step};
    Progress p;
    p.done = step + 1;
    p.total = a.steps;
    p.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    p.eta_s = p.elapsed_s / static_cast<double>(step + 1 - first_step) * static_cast<double>(a.steps - step - 1);
    const MemStats& m = compiled->engine().memory();
    // The plan of this step: a fresh run makes the optimizer state in its first update.
    const StepMemory& step_plan = step == first_step && a.resume.empty() ? plan.first : plan.steady;
    int64_t predicted_total = 0;
    const MemBytes predicted = combined_peak(step_plan, eval ? &plan.evaluation : nullptr, predicted_total);
    const bool print = eval || step % a.log_every == 0 || step + 1 == a.steps;
    if (print) {
      std::printf("step %4lld  loss %.4f%s  lr %.3e  %7.2f ms  %8.0f tok/s  peak %s per rank  %lld/%lld  %s elapsed, eta %s\n",
                  static_cast<long long>(step), r.loss,
                  eval ? format_val_loss(val_loss).c_str() : "", r.lr, r.seconds * 1e3,
                  static_cast<double>(tokens_in_batch) / r.seconds, format_bytes(m.total_peak).c_str(),
                  static_cast<long long>(p.done), static_cast<long long>(p.total), format_duration(p.elapsed_s).c_str(),
                  format_duration(p.eta_s).c_str());
      if (!memory_shown)
        std::printf("memory: peak %s per rank measured, %s predicted by the plan (peak at %s); reserved %s\n",
                    format_bytes(m.total_peak).c_str(), format_bytes(predicted_total).c_str(),
                    step_plan.peak_where().c_str(), format_bytes(compiled->engine().reserved_memory()).c_str());
      memory_shown = true;
      std::fflush(stdout);
    }
    if (log) {
      std::string line = step_json(step, r, static_cast<double>(tokens_in_batch) / r.seconds, m, p);
      if (eval) {  // full precision: std::to_string would keep six decimals
        std::ostringstream v;
        v.precision(9);
        v << ", \"val_loss\": " << val_loss;
        line.insert(line.size() - 1, v.str());
      }
      line.insert(line.size() - 1, ", \"predicted_peak_bytes\": " + peak_bytes_json(predicted, predicted_total) +
                                       ", \"reserved_bytes\": " + std::to_string(compiled->engine().reserved_memory()));
      if (a.resume.empty())  // the plan's cache follows a fresh run's steps
        line.insert(line.size() - 1, ", \"predicted_reserved_bytes\": " +
                                         std::to_string(plan.reserved_after_step[std::min<size_t>(
                                             static_cast<size_t>(step - first_step), plan.reserved_after_step.size() - 1)]));
      log << line << "\n" << std::flush;
    }
  }
  profile.finish();
  if (rank == 0 && !profile.summary().empty()) {
    std::fputs(profile.summary().c_str(), stdout);
    std::fflush(stdout);
  }
  if (stop) {
    std::fflush(stdout);
    if (a.save.empty()) {  // the steps are lost: a failure, as the signal's default action would report it
      if (rank == 0)
        std::fprintf(stderr, "fsdpc: stopped at step %lld by %s; nothing was saved (no --save DIR)\n",
                     static_cast<long long>(stopped_at), signal_name(stop));
      std::fflush(stderr);
      std::exit(128 + stop);  // MPI_Finalize runs at exit, on every rank
    }
    if (last_saved != stopped_at) save_checkpoint(compiled->engine(), *lm, a.save, stopped_at, a.checkpoint == "full", save_shard_bytes(a));
    if (rank == 0) {
      std::printf("stopped at step %lld, saved to %s (%s; --resume %s continues)\n", static_cast<long long>(stopped_at),
                  a.save.c_str(), signal_name(stop), a.save.c_str());
      std::fflush(stdout);
    }
    return;
  }
  if (rank == 0) {
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const int64_t ran = std::max<int64_t>(0, a.steps - first_step);
    std::printf("done: %lld step%s in %s, mean %.0f tok/s", static_cast<long long>(ran), ran == 1 ? "" : "s",
                format_duration(total).c_str(), step_seconds > 0 ? static_cast<double>(tokens_seen) / step_seconds : 0.0);
    if (best_val) std::printf(", best val loss %.4f (step %lld)", best_val->first, static_cast<long long>(best_val->second));
    if (a.fusion != "none") {
      fusion::JitCacheStats jit = fusion::jit_cache_stats();
#ifdef FSDPC_HAVE_CUDA
      // A cuda run's regions are NVRTC's; a cpu run's the LLVM JIT's: one count.
      const fusion::NvrtcStats nv = fusion::nvrtc_stats();
      jit.compiled += nv.compiled;
      jit.from_disk += nv.from_disk;
      jit.compile_s += nv.compile_s;
#endif
      std::printf(", %lld fusion regions compiled in %.2f s (%lld from FSDPC_JIT_CACHE)",
                  static_cast<long long>(jit.compiled), jit.compile_s, static_cast<long long>(jit.from_disk));
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  // Gathering the full state is collective and costs a copy of the model:
  // only when it is saved (the flag is the same on every rank).
  if (!a.save_state.empty()) {
    std::map<std::string, HostTensor> state = compiled->full_state_dict();
    if (rank == 0) save_state(a.save_state, state);
  }
}

}  // namespace

Command add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model sharded over the ranks of mpirun (a world of 1 without it)");
  add_model_options(cmd, a->src, /*allow_trace_file=*/false);
  add_sharding_options(cmd, a->sharding);
  cmd->add_option("--executor", a->executor,
                  "cpu (CPU kernels + MPI) | cuda (one GPU per rank, CUDA kernels + NCCL) | auto (cuda when a GPU is visible)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
  cmd->add_option("--fusion", a->fusion, "none | auto (elementwise ops and row reductions fused into regions compiled by the executor's fusion executor: LLVM on cpu, NVRTC on cuda)")
      ->check(CLI::IsMember({"none", "auto"}))
      ->capture_default_str();
  cmd->add_option("--steps", a->steps, "Optimizer steps")->check(whole_number(1))->capture_default_str();
  cmd->add_option("--optimizer", a->optimizer, "adamw | sgd")->check(CLI::IsMember({"adamw", "sgd"}))
      ->capture_default_str();
  cmd->add_option("--lr", a->lr, "Learning rate (the peak of --lr-schedule)")->check(real_number(0, false))
      ->capture_default_str();
  cmd->add_option("--beta1", a->beta1, "AdamW beta1, the gradient average's decay (PyTorch's default)")
      ->check(real_number(0, true, 1, false))->capture_default_str();
  cmd->add_option("--beta2", a->beta2, "AdamW beta2, the squared gradient average's decay (PyTorch's default)")
      ->check(real_number(0, true, 1, false))->capture_default_str();
  cmd->add_option("--eps", a->eps, "AdamW epsilon, added to the denominator (PyTorch's default)")
      ->check(real_number(0, true))->capture_default_str();
  cmd->add_option("--lr-schedule", a->lr_schedule,
                  "constant | cosine | linear, nanoGPT's get_lr(it) for step it = 0, 1, ...: "
                  "it < W (--warmup-steps): lr*(it+1)/(W+1); then constant: lr; cosine and linear, from W to "
                  "D (--decay-steps): min_lr + c*(lr - min_lr) with r = (it-W)/(D-W), c = 0.5*(1+cos(pi*r)) or 1-r; "
                  "it >= D: min_lr")
      ->check(CLI::IsMember({"constant", "cosine", "linear"}))->capture_default_str();
  cmd->add_option("--warmup-steps", a->warmup_steps, "Linear warmup steps W of --lr-schedule (0: none)")
      ->check(whole_number(0))->capture_default_str();
  cmd->add_option("--min-lr", a->min_lr, "The rate --lr-schedule cosine or linear decays to")
      ->check(real_number(0, true))->capture_default_str();
  cmd->add_option("--decay-steps", a->decay_steps, "Decay horizon D of --lr-schedule (default: --steps)")
      ->check(whole_number(1));
  cmd->add_option("--weight-decay", a->weight_decay, "Weight decay (AdamW: decoupled)")->check(real_number(0, true))
      ->capture_default_str();
  cmd->add_option("--momentum", a->momentum, "SGD momentum")->check(real_number(0, true, 1, true))->capture_default_str();
  cmd->add_option("--clip", a->clip, "Clip the global gradient norm to C (0: off)")->check(real_number(0, true))
      ->capture_default_str();
  cmd->add_option("--grad-accum", a->grad_accum, "Micro-batches per step")->check(whole_number(1))
      ->capture_default_str();
  cmd->add_flag("--no-sync", a->no_sync, "With --grad-accum: synchronise gradients on the last micro-batch only");
  cmd->add_flag("--keep-gathered", a->keep_gathered,
                "Gather each parameter once per step and keep it whole across the --grad-accum micro-batches (and "
                "--pp stages' micro-batches), reducing each gradient once after the last: fewer collectives, the "
                "memory of whole parameters and gradients (PyTorch FSDP's reshard_after_backward=False with no_sync)");
  cmd->add_option("--seed", a->seed, "Seed of initialisation and data")->capture_default_str();
  cmd->add_option("--mem-cap", a->mem_cap, "Per-rank memory cap, e.g. 512M");
  cmd->add_option("--init", a->init, "Hugging Face weights (GPT-2, Llama, Mistral, Qwen2): a .safetensors file or a folder")
      ->check(CLI::ExistingPath);
  cmd->add_option("--data", a->data,
                  "Training tokens: a flat file of little-endian ids, as --data-dtype says (by default a .bin of "
                  "uint16 ids as nanoGPT writes, a .u32 of uint32 ids, any other file as bytes)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--val-data", a->val_data, "Validation tokens, same formats")->check(CLI::ExistingFile);
  cmd->add_option("--data-dtype", a->data_dtype,
                  "auto | uint8 | uint16 | uint32: the ids of --data and --val-data (auto: .bin uint16, .u32 "
                  "uint32, else bytes); uint32 for vocabularies above 65536 (Llama 3, Qwen2)")
      ->check(CLI::IsMember({"auto", "uint8", "uint16", "uint32"}))->capture_default_str();
  cmd->add_option("--eval-every", a->eval_every,
                  "Validation loss every K steps and after the last (needs --val-data; default: after the last "
                  "step only; 0: never)")
      ->check(whole_number(0));
  cmd->add_option("--eval-batches", a->eval_batches, "Validation batches per evaluation")
      ->check(whole_number(1))->capture_default_str();
  cmd->add_option("--sampling", a->sampling, "sequential | random windows of --data")
      ->check(CLI::IsMember({"sequential", "random"}))->capture_default_str();
  cmd->add_option("--resume", a->resume, "Continue from the latest checkpoint --save wrote in DIR")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--save", a->save, "Write model.safetensors and config.json (Hugging Face) into DIR");
  cmd->add_option("--checkpoint", a->checkpoint,
                  "full: the Hugging Face export plus each rank's state; sharded: each rank's state only")
      ->check(CLI::IsMember({"full", "sharded"}))->capture_default_str();
  cmd->add_option("--save-shard-size", a->save_shard_size,
                  "Largest Hugging Face weight file of --save (B, K, M, G: powers of 1024); above it, "
                  "model-0000K-of-0000N.safetensors and an index (default 5000000000, Hugging Face's 5GB)");
  cmd->add_option("--save-every", a->save_every, "Also save every K steps (0: only at the end)")
      ->check(whole_number(0))->capture_default_str();
  cmd->add_option("--log-every", a->log_every, "Print every K steps (and evaluations)")->check(whole_number(1))
      ->capture_default_str();
  cmd->add_option("--log-json", a->log_json,
                  "Write one JSON line per step (rank 0): step, loss, grad_norm, lr, step_ms, tokens_per_s, "
                  "steps_done, steps_total, elapsed_s, eta_s, peak_bytes, predicted_peak_bytes (the memory plan's), "
                  "reserved_bytes (and val_loss, collectives)");
  cmd->add_option("--save-state", a->save_state, "Write the gathered parameters as JSON (rank 0)");
  // --batch from the model options is the GLOBAL batch here.
  cmd->add_option("--timeout", a->timeout,
                  "Seconds any rank waits for a collective before the job is aborted (exit 4) with the "
                  "collective named and the flight recorder written (default: FSDPC_TIMEOUT_S, else 600)");
  add_profile_options(cmd, *a);
  cmd->add_option("--flight-dir", a->flight_dir,
                  "Where each rank writes flight-rank{R}.json (on a timeout, a fatal error or SIGUSR1; default: "
                  "FSDPC_FLIGHT_DIR, else the --save folder, else ./fsdpc-flight)");
  return Command{cmd, [a] {
                   try {
                     run_train(*a);
                   } catch (const Error& e) {  // still one line: where the recorder went joins it
                     const std::string flight = dump_flight_on_error(e.what());
                     if (flight.empty()) throw;
                     throw Error(std::string(e.what()) + " (flight recorder: " + flight + ")");
                   } catch (const std::exception& e) {  // a bug: the recorder first, then terminate as before
                     const std::string flight = dump_flight_on_error(std::string("internal error: ") + e.what());
                     if (!flight.empty())
                       std::fprintf(stderr, "fsdpc: rank %d: flight recorder written to %s\n", mpi_world_rank(), flight.c_str());
                     throw;
                   }
                 }, [a] {
                   train_timeout(*a);  // a bad --timeout or FSDPC_TIMEOUT_S: exit 2 before MPI starts
                   if (a->init.empty() && a->resume.empty()) check_model_source(a->src, false);
                   if (a->eval_every > 0 && a->val_data.empty())
                     fail("--eval-every ", a->eval_every, ": there is nothing to evaluate without --val-data FILE");
                   if (a->data_dtype != "auto" && a->data.empty() && a->val_data.empty())
                     fail("--data-dtype ", a->data_dtype, ": there is no --data or --val-data FILE to read");
                   check_lr_schedule(lr_schedule(*a), a->lr);  // before MPI starts: one message, exit 2
                   check_profile_args(*a);
                 }};
}

}  // namespace fsdpc::cli
