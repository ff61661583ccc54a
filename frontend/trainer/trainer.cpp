// The Trainer (frontend/trainer/trainer.h). The global batch of each step is
// split across the data-parallel ranks (each its contiguous slice,
// DistributedSampler semantics); the logged loss is the mean over the global
// batch, reported by rank 0 only.
#include "frontend/trainer/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "executors/claim.h"
#include "executors/comm/mpi_world.h"
#include "executors/fusion/fusion_kernel.h"
#ifdef FSDPC_HAVE_CUDA
#include "executors/fusion/nvrtc_compiler.h"
#endif
#include "frontend/hf_checkpoint.h"
#include "frontend/models/language_model.h"
#include "frontend/models/registry.h"
#include "frontend/trainer/checkpoint.h"
#include "frontend/trainer/launch_fingerprint.h"
#include "frontend/trainer/train_profile.h"
#include "ir/error.h"
#include "passes/strategy.h"
#include "runtime/data.h"
#include "runtime/io/token_data.h"
#include "runtime/planner/memory_plan.h"
#include "runtime/reliability/consistency.h"
#include "runtime/reliability/preemption.h"
#include "runtime/reliability/watchdog.h"

namespace fsdpc {

// What setup() builds for the steps.
struct Trainer::State {
  int world = 1, rank = 0;
  Watchdog* watchdog = nullptr;
  std::unique_ptr<HfWeights> init;
  const LanguageModel* lm = nullptr;
  JitOptions jit;
  std::unique_ptr<Compiled> compiled;
  std::unique_ptr<TokenData> data, val;
  MemoryPlan plan;  // what each step will hold, from the traces, before any step runs
  int64_t first_step = 0;
};

namespace {

// The model a run trains when it was given none: --config, --model, else
// the config.json beside --init's or --resume's weights.
std::unique_ptr<Model> make_train_model(const TrainOptions& o, const HfWeights* init) {
  if (!o.config.empty()) return make_model_from_config(o.config);
  if (!o.model.empty()) return make_model(o.model);
  if (init && !init->config_path().empty()) return make_model_from_config(init->config_path());
  const std::string resumed = o.resume + "/config.json";
  if (!o.resume.empty() && std::filesystem::exists(resumed)) return make_model_from_config(resumed);
  fail(o.init.empty() ? "--resume " + o.resume : "--init " + o.init,
       ": no config.json beside the weights; pass --config or --model");
}

// A flat strategy left on the default mesh of one rank spreads over the
// world, as FSDP's default process group is every rank; a mesh that was set
// must have the world's ranks.
void fit_mesh_to_world(PipelineOptions& p, int world) {
  const int stage_world = p.mesh.stage_world();
  if (stage_world * p.pp == world) return;
  const int tp = p.mesh.tp;
  if (!is_hybrid(p.strategy) && p.mesh.data_parallel() == 1 && world % (p.pp * tp) == 0) {
    p.mesh = flat_mesh(world / (p.pp * tp));
    p.mesh.tp = tp;
    return;
  }
  fail("the mesh has ", stage_world * p.pp, " ranks (", p.mesh.replicas, " x ", p.mesh.shards, ", tp ", tp, ", pp ",
       p.pp, ") but the world has ", world);
}

// The jit options of this rank: the global batch split over the
// data-parallel ranks (tensor-parallel ranks share their batch).
JitOptions jit_options(const TrainOptions& o, bool is_lm) {
  JitOptions j;
  j.pipeline = o.pipeline;
  j.pipeline.verify = false;  // verified by the tests; training runs the passes only
  j.engine = o.engine;
  const int dp = j.pipeline.mesh.data_parallel();
  const int64_t batch = o.batch ? o.batch : (is_lm ? 2 * dp : 64);  // global
  if (batch % dp != 0) fail("--batch ", batch, " must be divisible by the ", dp, " data-parallel ranks");
  j.capture.batch = batch / dp;
  if (o.seq) j.capture.seq = o.seq;
  j.mean_square_loss = !is_lm;
  return j;
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

// ", 12 fusion regions compiled in 0.15 s (0 from FSDPC_JIT_CACHE)": a cuda
// run's regions are NVRTC's, a cpu run's the LLVM JIT's; one count.
std::string fusion_summary() {
  fusion::JitCacheStats jit = fusion::jit_cache_stats();
#ifdef FSDPC_HAVE_CUDA
  const fusion::NvrtcStats nv = fusion::nvrtc_stats();
  jit.compiled += nv.compiled;
  jit.from_disk += nv.from_disk;
  jit.compile_s += nv.compile_s;
#endif
  char buf[128];
  std::snprintf(buf, sizeof buf, ", %lld fusion regions compiled in %.2f s (%lld from FSDPC_JIT_CACHE)",
                static_cast<long long>(jit.compiled), jit.compile_s, static_cast<long long>(jit.from_disk));
  return buf;
}

}  // namespace

Trainer::Trainer(TrainOptions options) : options_(std::move(options)) {}

Trainer::Trainer(TrainOptions options, std::unique_ptr<Model> model)
    : options_(std::move(options)), model_(std::move(model)) {}

Trainer::~Trainer() = default;

Compiled& Trainer::compiled() {
  if (!state_ || !state_->compiled) fail("Trainer::compiled(): run() has not compiled the model yet");
  return *state_->compiled;
}

TrainResult Trainer::run() {
  options_.engine.lr_schedule = train_lr_schedule(options_);
  check_train_options(options_, model_ != nullptr);  // outside the try: a refused option writes no flight recorder
  try {
    setup();
    return loop();
  } catch (const Error& e) {  // still one line: where the recorder went joins it
    const std::string flight = dump_flight_on_error(e.what());
    if (flight.empty()) throw;
    throw Error(std::string(e.what()) + " (flight recorder: " + flight + ")");
  } catch (const std::exception& e) {  // a bug: the recorder first, then on to the caller
    const std::string flight = dump_flight_on_error(std::string("internal error: ") + e.what());
    if (!flight.empty())
      std::fprintf(stderr, "fsdpc: rank %d: flight recorder written to %s\n", mpi_world_rank(), flight.c_str());
    throw;
  }
}

void Trainer::setup() {
  const TrainOptions& o = options_;
  mpi_init();
  install_stop_handlers();
  state_ = std::make_unique<State>();
  State& s = *state_;
  s.world = mpi_world_size();
  s.rank = mpi_world_rank();
  s.watchdog = &install_watchdog({train_timeout(o), flight_dir(o), s.rank, s.world});
  LaunchFingerprint fingerprint;
  bool checked = false;
  // Until every rank has compared what it runs (in jit(), before the engine
  // builds anything collective), an error on one rank is reported through
  // the same exchange, so every rank stops with one message and no abort.
  try {
    if (!o.init.empty() && !o.resume.empty()) fail("--init and --resume exclude each other");
    if (o.layout) options_.pipeline = o.layout(s.world);
    fit_mesh_to_world(options_.pipeline, s.world);
    s.init = o.init.empty() ? nullptr : std::make_unique<HfWeights>(o.init);
    if (!model_) model_ = make_train_model(o, s.init.get());
    s.lm = dynamic_cast<const LanguageModel*>(model_.get());
    if (!s.lm && (s.init || !o.data.empty() || !o.save.empty()))
      fail("--init, --data and --save apply to language models (GPT-2, Llama); ", model_->name(),
           " trains on synthetic features");
    s.jit = jit_options(o, s.lm != nullptr);
    if (s.lm) {  // a bad token file stops every rank with one message, before anything is compiled
      const int64_t seq = model_->inputs(s.jit.capture)[0].shape[1], vocab = s.lm->vocab_size();
      if (!o.data.empty())
        s.data = std::make_unique<TokenData>(o.data, vocab, seq, o.sampling, o.engine.seed, o.data_dtype);
      if (!o.val_data.empty())
        s.val = std::make_unique<TokenData>(o.val_data, vocab, seq, Sampling::sequential, 0, o.data_dtype);
    }
    fingerprint = launch_fingerprint(o, s.jit, *model_, s.world);
    s.jit.engine.before_collectives = [&](const EngineTraces& traces) {
      add_traces(fingerprint, traces);
      checked = true;
      if (const std::string d = launch_disagreement(fingerprint); !d.empty()) exit_all_ranks(2, d);
      EngineOptions planned = s.jit.engine;
      planned.mesh = s.jit.pipeline.mesh;
      planned.mesh.pp = s.jit.pipeline.pp;
      const std::optional<int64_t> cap = s.jit.engine.mem_cap;
      if (s.jit.pipeline.pp == 1) {
        s.plan = plan_memory(traces, planned);  // every rank plans the same traces: all refuse, or none
        if (cap)
          if (const std::string r = mem_cap_refusal(s.plan, *cap); !r.empty()) exit_all_ranks(2, r);
        return;
      }
      // Each pipeline stage plans its own traces; the first rank refusing
      // (by stage) speaks for all, through the same exchange as the check.
      const int stage = s.rank / (s.world / s.jit.pipeline.pp);
      s.plan = plan_memory(traces, planned, stage);
      LaunchFingerprint refused;
      if (cap)
        if (const std::string r = mem_cap_refusal(s.plan, *cap); !r.empty())
          refused.set_error("pipeline stage " + std::to_string(stage) + ": " + r);
      if (const std::string d = launch_disagreement(refused); !d.empty()) exit_all_ranks(2, d);
    };
    s.compiled = jit(*model_, s.jit);
    s.jit.engine.before_collectives = nullptr;  // it refers to this frame; the engine ran it once, when built
  } catch (const std::exception& e) {
    if (checked) throw;
    LaunchFingerprint failed;
    failed.set_error(e.what());
    exit_all_ranks(2, launch_disagreement(failed));
  }
  if (!o.resume.empty()) {
    s.first_step = resume_checkpoint(s.compiled->engine(), o.resume);
  } else if (s.init) {
    verify_init(o.init);
    load_hf_weights(s.compiled->engine(), *s.lm, *s.init);
  }
}

TrainResult Trainer::loop() {
  const TrainOptions& o = options_;
  State& s = *state_;
  Compiled& compiled = *s.compiled;
  Engine& engine = compiled.engine();
  const Model& model = *model_;
  const bool fresh = o.resume.empty();
  const bool full = o.checkpoint == CheckpointKind::full;
  std::ofstream log;
  if (s.rank == 0 && !o.log_json.empty()) {
    log.open(o.log_json, std::ios::trunc);
    if (!log) fail("--log-json ", o.log_json, ": cannot open for writing");
  }
  const int64_t b_local = *s.jit.capture.batch;
  const std::vector<ModelInput> shapes = model.inputs(s.jit.capture);
  SyntheticTokens tokens(o.engine.seed, s.lm ? s.lm->vocab_size() : 1);
  if (s.rank == 0 && o.print) {
    std::fputs(train_header(o, model, s.world, s.first_step).c_str(), stdout);
    std::fflush(stdout);
  }
  TrainProfile profile(o, s.first_step,
                       model.name() + ", " + std::string(strategy_name(o.pipeline.strategy)) + ", " +
                           std::to_string(s.world) + " ranks");
  const auto started = std::chrono::steady_clock::now();
  TrainResult result;
  result.first_step = s.first_step;
  double step_seconds = 0;  // the steps alone, for the mean throughput
  int64_t tokens_seen = 0;
  int64_t last_saved = fresh ? -1 : s.first_step;  // the step a checkpoint continues from
  bool memory_shown = false;  // predicted beside measured, at the first printed step
  bool outer_ran = false;     // DiLoCo: an outer step has run, after which the cache can hold more
  // The batch is split over the data-parallel ranks; the ranks of a
  // tensor-parallel group (adjacent) read the same part of it. With
  // pipeline stages, the ranks at one place in every stage read the same
  // batch too (stage 0 its ids, the last stage its targets).
  const int tp = s.jit.pipeline.mesh.tp, stage_world = s.world / s.jit.pipeline.pp;
  const int data_ranks = stage_world / tp, data_rank = s.rank % stage_world / tp;
  result.end_step = o.steps;
  for (int64_t step = s.first_step; step < o.steps; ++step) {
    s.watchdog->safe_point();  // a SIGUSR1 between steps
    if ((result.stop_signal = agree_on_stop()) != 0) {  // every rank, at the same step
      result.end_step = step;
      break;
    }
    std::vector<HostTensor> batch;
    int64_t tokens_in_batch = 0;
    const Shape& shape = shapes[0].shape;
    if (s.lm) {
      std::vector<int64_t> idx(static_cast<size_t>(numel(shape))), targets(idx.size());
      if (s.data) s.data->batch(step, data_rank, data_ranks, b_local * data_ranks, idx.data(), targets.data());
      else tokens.batch(step, data_rank, data_ranks, b_local, shape[1], idx.data(), targets.data());
      batch = {HostTensor::ints(shape, std::move(idx)), HostTensor::ints(shape, std::move(targets))};
      tokens_in_batch = numel(shape) * data_ranks;
    } else {
      std::vector<float> x(static_cast<size_t>(numel(shape)));
      synthetic_features(o.engine.seed, step, data_rank, data_ranks, b_local, numel(shape) / b_local, x.data());
      batch = {HostTensor::floats(shape, std::move(x))};
      tokens_in_batch = b_local * data_ranks;
    }
    engine.reset_peak_memory();
    profile.before_step(engine, step);
    const StepResult r = compiled.train_step(batch);
    profile.after_step(engine, step);
    // Unset eval_every with val_data evaluates once, after the last step.
    const bool eval = s.val && o.eval_every != 0 &&
                      ((o.eval_every > 0 && (step + 1) % o.eval_every == 0) || step + 1 == o.steps);
    const double val_loss =
        eval ? validation_loss(compiled, *s.val, o.eval_batches, data_ranks, data_rank, b_local / o.engine.grad_accum)
             : 0;
    if (!o.save.empty() && ((o.save_every > 0 && (step + 1) % o.save_every == 0) || step + 1 == o.steps)) {
      save_checkpoint(engine, *s.lm, o.save, step + 1, full, o.save_shard_bytes);
      last_saved = step + 1;
    }
    if (s.rank != 0) continue;
    step_seconds += r.seconds;
    tokens_seen += tokens_in_batch;
    if (eval && (!result.best_val || val_loss < result.best_val->first)) result.best_val = {val_loss, step};
    StepRecord rec;
    rec.step = step;
    rec.result = r;
    if (eval) rec.val_loss = val_loss;
    rec.tokens = tokens_in_batch;
    rec.tokens_per_s = static_cast<double>(tokens_in_batch) / r.seconds;
    rec.done = step + 1;
    rec.total = o.steps;
    rec.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    rec.eta_s = rec.elapsed_s / static_cast<double>(step + 1 - s.first_step) * static_cast<double>(o.steps - step - 1);
    rec.memory = engine.memory();
    // The plan of this step: a fresh run makes the optimizer state in its
    // first update; DiLoCo's outer step ends a round.
    // Streaming DiLoCo's steps follow their place in the round (step + 1
    // is the optimizer's count after this step).
    const StepMemory* streaming = s.plan.step_at(step + 1);
    const StepMemory& step_plan =
        streaming ? *streaming
                  : step == s.first_step && fresh ? s.plan.first
                                                  : (r.outer && s.plan.outer ? *s.plan.outer : s.plan.steady);
    rec.predicted = combined_peak(step_plan, eval ? &s.plan.evaluation : nullptr, rec.predicted_total);
    rec.predicted_where = step_plan.peak_where();
    rec.reserved = engine.reserved_memory();
    // The plan's cache follows a fresh run's steps, up to its first outer
    // step when not every step has one.
    outer_ran = outer_ran || (r.outer && o.pipeline.diloco.outer_steps > 1);
    if (fresh && !outer_ran)
      rec.predicted_reserved = s.plan.reserved_after_step[std::min<size_t>(static_cast<size_t>(step - s.first_step),
                                                                           s.plan.reserved_after_step.size() - 1)];
    if (o.print && (eval || step % o.log_every == 0 || step + 1 == o.steps)) {
      std::printf("%s\n", step_line(rec).c_str());
      if (!memory_shown) std::printf("%s\n", memory_line(rec).c_str());
      memory_shown = true;
      std::fflush(stdout);
    }
    if (log) log << step_json(rec) << "\n" << std::flush;
    if (o.on_step) o.on_step(rec);
  }
  profile.finish();
  if (s.rank == 0 && o.print && !profile.summary().empty()) {
    std::fputs(profile.summary().c_str(), stdout);
    std::fflush(stdout);
  }
  result.tokens_per_s = step_seconds > 0 ? static_cast<double>(tokens_seen) / step_seconds : 0.0;
  if (result.stop_signal) {
    std::fflush(stdout);
    if (o.save.empty()) return result;  // the steps are lost: the caller says so
    if (last_saved != result.end_step)
      save_checkpoint(engine, *s.lm, o.save, result.end_step, full, o.save_shard_bytes);
    result.saved = true;
    if (s.rank == 0 && o.print) {
      std::printf("stopped at step %lld, saved to %s (%s; --resume %s continues)\n",
                  static_cast<long long>(result.end_step), o.save.c_str(), stop_signal_name(result.stop_signal),
                  o.save.c_str());
      std::fflush(stdout);
    }
    return result;
  }
  result.saved = !o.save.empty();
  if (s.rank == 0 && o.print) {
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const int64_t ran = std::max<int64_t>(0, o.steps - s.first_step);
    std::printf("done: %lld step%s in %s, mean %.0f tok/s", static_cast<long long>(ran), ran == 1 ? "" : "s",
                format_duration(total).c_str(), result.tokens_per_s);
    if (result.best_val)
      std::printf(", best val loss %.4f (step %lld)", result.best_val->first,
                  static_cast<long long>(result.best_val->second));
    if (o.engine.fusion != FusionMode::none) std::printf("%s", fusion_summary().c_str());
    std::printf("\n");
    std::fflush(stdout);
  }
  // Gathering the full state is collective and costs a copy of the model:
  // only when it is saved (the option is the same on every rank).
  if (!o.save_state.empty()) {
    const std::map<std::string, HostTensor> state = compiled.full_state_dict();
    if (s.rank == 0) save_state(o.save_state, state);
  }
  return result;
}

}  // namespace fsdpc
