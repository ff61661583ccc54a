// What a training run does, for the library's Trainer (frontend/trainer/
// trainer.h) and for `fsdpc train`, whose flags fill it one for one: a field
// here is documented by the flag of the same name (`fsdpc train --help`),
// and the trainer's messages name the flag.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "frontend/hf_checkpoint.h"
#include "passes/pipeline.h"
#include "runtime/engine.h"
#include "runtime/io/token_data.h"

namespace fsdpc {

struct StepRecord;  // frontend/trainer/train_log.h

// --checkpoint: the Hugging Face export plus each rank's state (full), or
// each rank's state only (sharded: no rank ever holds the whole model).
enum class CheckpointKind { full, sharded };
const char* checkpoint_kind_name(CheckpointKind k);
// "full", "sharded"; nullopt for anything else.
std::optional<CheckpointKind> parse_checkpoint_kind(const std::string& name);

struct TrainOptions {
  // The model: a built-in name (`fsdpc models`) or a Hugging Face
  // config.json; with neither, --init's or --resume's config.json. A
  // Trainer constructed with a Model trains that one instead.
  std::string model, config;
  // The GLOBAL batch of a step, split over the data-parallel ranks (0: two
  // rows a data-parallel rank for a language model, 64 otherwise), and the
  // sequence length (0: the model's context).
  int64_t batch = 0, seq = 0;
  // Strategy, mesh, tp, pp, wrap, bucketing, precision, remat... A flat
  // strategy on the default mesh spreads over every rank.
  PipelineOptions pipeline;
  // The layout for a world of N ranks, when it depends on N (a flat mesh of
  // every rank): called once the world is known, it replaces `pipeline`.
  // An error it throws stops every rank with one message.
  std::function<PipelineOptions(int world)> layout;
  // Optimizer, lr schedule, clip, grad_accum, no_sync, keep_gathered,
  // target (--executor, resolved where it was asked for: `auto` through
  // resolve_target in executors/claim.h, as fsdpc train does), fusion, seed
  // and mem_cap. before_collectives is the trainer's.
  EngineOptions engine;
  int64_t steps = 20;

  // Data: token files (--data, --val-data) or, without them, synthetic tokens.
  std::string data, val_data;
  TokenDtype data_dtype = TokenDtype::automatic;
  Sampling sampling = Sampling::sequential;
  int eval_every = -1;  // -1: after the last step when there is val_data; 0: never
  int eval_batches = 4;

  // Checkpoints: start from Hugging Face weights (init) or continue a run
  // (resume); save into a folder every save_every steps and at the end.
  std::string init, resume, save;
  CheckpointKind checkpoint = CheckpointKind::full;
  int64_t save_shard_bytes = kDefaultHfShardBytes;
  int save_every = 0;
  std::string save_state;  // the gathered parameters as JSON (rank 0)

  // Logging: rank 0 prints a line every log_every steps (print), writes a
  // JSON line a step to log_json, and calls on_step after every step.
  int log_every = 1;
  bool print = true;
  std::string log_json;
  std::function<void(const StepRecord&)> on_step;

  // Reliability: a collective waited on for longer than timeout_s aborts
  // the job with the flight recorder written to flight_dir (0 and "": the
  // defaults, FSDPC_TIMEOUT_S else 600 s, and FSDPC_FLIGHT_DIR else the
  // save folder else ./fsdpc-flight). SIGTERM or SIGINT stops the run at the
  // end of a step, saving first when there is a save folder.
  double timeout_s = 0;
  std::string flight_dir;

  // --profile FILE and --profile-steps A:B (frontend/trainer/train_profile.h).
  std::string profile, profile_steps;
};

// Every check that needs no rank and no file contents: the options agree
// with each other, and each path the run will write to can be written
// (runtime/io/files.h). fsdpc::Error (exit 2) naming the flag otherwise.
// `has_model`: the Trainer was given a Model.
void check_train_options(const TrainOptions& o, bool has_model = false);

// The collective timeout of a run: timeout_s, else FSDPC_TIMEOUT_S (or
// FSDPC_NCCL_TIMEOUT_S), else 600 s.
double train_timeout(const TrainOptions& o);
// The learning-rate schedule of a run: engine.lr_schedule, decaying over
// the run's steps unless decay_steps says otherwise.
LrSchedule train_lr_schedule(const TrainOptions& o);
// Where each rank writes its flight recorder.
std::string flight_dir(const TrainOptions& o);

}  // namespace fsdpc
