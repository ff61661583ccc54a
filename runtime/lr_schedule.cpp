// nanoGPT's get_lr, for every schedule (see runtime/lr_schedule.h).
#include "runtime/lr_schedule.h"

#include <cmath>
#include <numbers>

#include "ir/error.h"

namespace fsdpc {

std::optional<LrSchedule::Kind> parse_lr_schedule(const std::string& name) {
  if (name == "constant") return LrSchedule::Kind::constant;
  if (name == "cosine") return LrSchedule::Kind::cosine;
  if (name == "linear") return LrSchedule::Kind::linear;
  return std::nullopt;
}

const char* lr_schedule_name(LrSchedule::Kind kind) {
  switch (kind) {
    case LrSchedule::Kind::constant: return "constant";
    case LrSchedule::Kind::cosine: return "cosine";
    case LrSchedule::Kind::linear: return "linear";
  }
  return "?";
}

void check_lr_schedule(const LrSchedule& s, double lr) {
  if (s.warmup_steps < 0) fail("--warmup-steps ", s.warmup_steps, ": must be 0 or more");
  // `!(x >= 0)` also rejects NaN.
  if (!(s.min_lr >= 0) || s.min_lr > lr) fail("--min-lr ", s.min_lr, ": must be in [0, --lr ", lr, "]");
  if (s.kind == LrSchedule::Kind::constant) return;
  // The decay divides by D - W: a horizon inside the warmup leaves nothing to decay over.
  if (s.decay_steps <= s.warmup_steps)
    fail("--lr-schedule ", lr_schedule_name(s.kind), ": the decay horizon (", s.decay_steps,
         " steps, --decay-steps or --steps) must exceed --warmup-steps ", s.warmup_steps);
}

double scheduled_lr(const LrSchedule& s, double lr, int64_t step) {
  const int64_t w = s.warmup_steps, d = s.decay_steps;
  if (step < w) return lr * static_cast<double>(step + 1) / static_cast<double>(w + 1);
  if (s.kind == LrSchedule::Kind::constant) return lr;
  if (step >= d) return s.min_lr;
  const double r = static_cast<double>(step - w) / static_cast<double>(d - w);
  const double coeff = s.kind == LrSchedule::Kind::cosine ? 0.5 * (1.0 + std::cos(std::numbers::pi * r)) : 1.0 - r;
  return s.min_lr + coeff * (lr - s.min_lr);
}

}  // namespace fsdpc
