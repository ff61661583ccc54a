// --optimizer, --lr, --beta1, --beta2, --eps, --weight-decay, --momentum,
// --clip, --lr-schedule, --warmup-steps, --min-lr, --decay-steps: the
// optimizer and learning-rate flags of fsdpc train, as sharding_options.cpp
// holds the layout's.
#include "runtime/engine.h"
#include "runtime/lr_schedule.h"
#include "tools/cli_io.h"
#include "tools/commands.h"

namespace fsdpc::cli {

void add_optimizer_options(CLI::App* cmd, EngineOptions& e, OptimizerArgs& names) {
  OptimizerOptions& opt = e.optimizer;
  cmd->add_option("--optimizer", names.optimizer, "adamw | sgd")->check(CLI::IsMember({"adamw", "sgd"}))
      ->capture_default_str();
  cmd->add_option("--lr", opt.lr, "Learning rate (the peak of --lr-schedule)")->check(real_number(0, false))
      ->capture_default_str();
  cmd->add_option("--beta1", opt.beta1, "AdamW beta1, the gradient average's decay (PyTorch's default)")
      ->check(real_number(0, true, 1, false))->capture_default_str();
  cmd->add_option("--beta2", opt.beta2, "AdamW beta2, the squared gradient average's decay (PyTorch's default)")
      ->check(real_number(0, true, 1, false))->capture_default_str();
  cmd->add_option("--eps", opt.eps, "AdamW epsilon, added to the denominator (PyTorch's default)")
      ->check(real_number(0, true))->capture_default_str();
  cmd->add_option("--lr-schedule", names.lr_schedule,
                  "constant | cosine | linear, nanoGPT's get_lr(it) for step it = 0, 1, ...: "
                  "it < W (--warmup-steps): lr*(it+1)/(W+1); then constant: lr; cosine and linear, from W to "
                  "D (--decay-steps): min_lr + c*(lr - min_lr) with r = (it-W)/(D-W), c = 0.5*(1+cos(pi*r)) or 1-r; "
                  "it >= D: min_lr")
      ->check(CLI::IsMember({"constant", "cosine", "linear"}))->capture_default_str();
  cmd->add_option("--warmup-steps", e.lr_schedule.warmup_steps, "Linear warmup steps W of --lr-schedule (0: none)")
      ->check(whole_number(0))->capture_default_str();
  cmd->add_option("--min-lr", e.lr_schedule.min_lr, "The rate --lr-schedule cosine or linear decays to")
      ->check(real_number(0, true))->capture_default_str();
  cmd->add_option("--decay-steps", e.lr_schedule.decay_steps, "Decay horizon D of --lr-schedule (default: --steps)")
      ->check(whole_number(1));
  cmd->add_option("--weight-decay", opt.weight_decay, "Weight decay (AdamW: decoupled)")->check(real_number(0, true))
      ->capture_default_str();
  cmd->add_option("--momentum", opt.momentum, "SGD momentum")->check(real_number(0, true, 1, true))->capture_default_str();
  cmd->add_option("--clip", e.clip, "Clip the global gradient norm to C (0: off)")->check(real_number(0, true))
      ->capture_default_str();
}

void apply_optimizer_names(const OptimizerArgs& names, EngineOptions& e) {
  // CLI11 admitted only the names its checks list.
  e.optimizer.kind = *parse_optimizer_kind(names.optimizer);
  e.lr_schedule.kind = *parse_lr_schedule(names.lr_schedule);
}

}  // namespace fsdpc::cli
