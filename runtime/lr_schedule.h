// Learning-rate schedules as nanoGPT, torchtitan and the Hugging Face Trainer
// offer them: a linear warmup, then constant, cosine or linear decay to a
// floor. A pure function of the global step, so a resumed run (whose
// checkpoint holds the step) uses the same rate at step k as one that never
// stopped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace fsdpc {

// nanoGPT's get_lr(it), with lr the base rate, W = warmup_steps and
// D = decay_steps (the horizon: the run's step count by default):
//   it < W:        lr * (it + 1) / (W + 1)
//   it >= D:       min_lr                              (cosine, linear)
//   otherwise, r = (it - W) / (D - W):
//     constant:    lr
//     cosine:      min_lr + 0.5 * (1 + cos(pi * r)) * (lr - min_lr)
//     linear:      min_lr + (1 - r) * (lr - min_lr)
// Steps count from 0. The default (constant, no warmup) is lr at every step.
struct LrSchedule {
  enum class Kind { constant, cosine, linear } kind = Kind::constant;
  int64_t warmup_steps = 0;
  int64_t decay_steps = 0;  // the decay horizon D; must exceed warmup_steps for cosine and linear
  double min_lr = 0;
};

// "constant" | "cosine" | "linear"; nullopt for anything else.
std::optional<LrSchedule::Kind> parse_lr_schedule(const std::string& name);
const char* lr_schedule_name(LrSchedule::Kind kind);

// Throws fsdpc::Error naming the CLI flag for a schedule that cannot run
// with base rate `lr`: negative warmup, min_lr outside [0, lr], a decay
// horizon not past the warmup.
void check_lr_schedule(const LrSchedule& s, double lr);

// The rate of step `step` (0-based), by the formula above.
double scheduled_lr(const LrSchedule& s, double lr, int64_t step);

}  // namespace fsdpc
