// The Trainer: what `fsdpc train` runs, as a library. One object per rank of
// an MPI job (a world of one without mpirun): it builds the model, checks
// that every rank was launched alike, compiles it with jit(), starts from
// Hugging Face weights or resumes a checkpoint, and runs the steps with
// their data, evaluation, learning-rate schedule, checkpoints, preemption
// (SIGTERM/SIGINT stop at a step boundary), profiling and logging.
//
//   fsdpc::TrainOptions o;
//   o.model = "gpt2-tiny";
//   o.steps = 100;
//   o.save = "ckpt";
//   fsdpc::Trainer trainer(o);
//   fsdpc::TrainResult r = trainer.run();   // collective
//   ...  o.resume = "ckpt"; o.steps = 200; fsdpc::Trainer(o).run();
#pragma once

#include <memory>
#include <optional>
#include <utility>

#include "frontend/jit.h"
#include "frontend/model.h"
#include "frontend/trainer/train_log.h"
#include "frontend/trainer/train_options.h"

namespace fsdpc {

struct TrainResult {
  int64_t first_step = 0;  // 0, or the step a resume continued from
  int64_t end_step = 0;    // the step the run stopped before (options.steps unless stopped)
  // The signal (SIGTERM, SIGINT) that stopped the run early, 0 if none;
  // with a save folder the run saved at end_step first.
  int stop_signal = 0;
  bool saved = false;  // a checkpoint for end_step is in options.save
  // Rank 0 only: the mean throughput of the steps alone, and the best
  // validation loss with its step.
  double tokens_per_s = 0;
  std::optional<std::pair<double, int64_t>> best_val;
};

class Trainer {
 public:
  explicit Trainer(TrainOptions options);
  // Trains `model` instead of options.model / options.config.
  Trainer(TrainOptions options, std::unique_ptr<Model> model);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Runs the whole training; collective over MPI_COMM_WORLD (MPI is
  // initialised here if it is not yet). Errors are fsdpc::Error; an error
  // during the steps also writes each rank's flight recorder, and its path
  // joins the message.
  TrainResult run();

  // After run(): the compiled model, its trained shards on this rank.
  Compiled& compiled();
  const Model& model() const { return *model_; }

 private:
  struct State;
  void setup();
  TrainResult loop();

  TrainOptions options_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<State> state_;
};

}  // namespace fsdpc
