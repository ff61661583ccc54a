// Optimizers that update only this rank's shard (FSDP/ZeRO: optimizer state
// is sharded like the parameters). PyTorch's update rules, elementwise, so
// stepping the shards separately equals stepping the whole parameter.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/allocator.h"

namespace fsdpc {

// Defaults follow torch.optim where they agree with ours. Differences:
// torch.optim.AdamW defaults weight_decay to 0.01, here it is 0 (the CLI
// passes it explicitly); SGD has no dampening or Nesterov.
//  - sgd:   g += weight_decay * p (L2, coupled); with momentum the buffer
//           starts as the first gradient (torch), then buf = m * buf + g;
//           p -= lr * buf (or lr * g without momentum).
//  - adamw: p -= lr * weight_decay * p (decoupled, Loshchilov & Hutter),
//           then Adam with bias correction, step count starting at 1:
//           p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
struct OptimizerOptions {
  enum class Kind { sgd, adamw } kind = Kind::adamw;
  double lr = 1e-3;
  double momentum = 0;  // sgd only
  double weight_decay = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adamw only
};
// "adamw", "sgd" (--optimizer); nullopt for anything else.
std::optional<OptimizerOptions::Kind> parse_optimizer_kind(const std::string& name);

// One parameter's local shard. `grad` may be null (torch's grad None): the
// parameter is skipped and its step count does not advance.
struct ParamRef {
  std::string name;
  float* param;
  const float* grad;
  int64_t numel;
};

class Optimizer {
 public:
  // Throws fsdpc::Error for an option out of range (negative lr, betas
  // outside [0, 1), ...), as torch's constructors do.
  Optimizer(const OptimizerOptions& options, Allocator& allocator);

  // One update of every parameter. State (exp_avg and exp_avg_sq for adamw,
  // the momentum buffer for sgd with momentum) is allocated on a name's first
  // step, as MemCategory::optimizer_state, so memory reports show it.
  // `grad_scale` multiplies every gradient as it is read (clipping's float
  // coefficient, clip_grad_coefficient()), so clipping needs no pass of its own.
  void step(const std::vector<ParamRef>& params, float grad_scale = 1.0f);
  // Number of step() calls so far.
  int64_t steps() const { return steps_; }
  const OptimizerOptions& options() const { return options_; }
  // The rate of the next step() (a schedule's); throws fsdpc::Error when negative.
  void set_lr(double lr);

  // The state of one parameter, for checkpoints: its step count and its
  // buffers (exp_avg and exp_avg_sq for adamw, the momentum buffer for sgd;
  // null when the optimizer keeps none).
  struct StateView {
    int64_t step = 0;
    float* buf0 = nullptr;
    float* buf1 = nullptr;
    int64_t numel = 0;
  };
  // The state of `p` (allocated, zeroed, on first use) to read or restore.
  StateView state(const ParamRef& p);
  void set_steps(int64_t steps) { steps_ = steps; }
  void set_param_step(const std::string& name, int64_t step);

 private:
  struct State {
    int64_t numel = 0;
    int64_t step = 0;  // per parameter, as torch keeps it
    std::shared_ptr<Storage> buf0;  // exp_avg or momentum buffer
    std::shared_ptr<Storage> buf1;  // exp_avg_sq
  };
  State& state_for(const ParamRef& p, bool zeroed, bool* created);
  void step_sgd(const ParamRef& p, float grad_scale);
  void step_adamw(const ParamRef& p, float grad_scale);

  OptimizerOptions options_;
  Allocator& allocator_;
  std::unordered_map<std::string, State> state_;
  int64_t steps_ = 0;
};

}  // namespace fsdpc
