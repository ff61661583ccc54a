// The options of `fsdpc train`, shared by the command and the launch
// fingerprint that every rank compares before the first collective.
#pragma once

#include <cstdint>
#include <string>

#include "tools/commands.h"

namespace fsdpc::cli {

struct TrainArgs {
  ModelSource src;
  ShardingArgs sharding;
  std::string optimizer = "adamw";
  std::string log_json, save_state, mem_cap, init, data, val_data, sampling = "sequential", save, resume;
  std::string checkpoint = "full", executor = "cpu", fusion = "auto";
  std::string data_dtype = "auto";  // --data-dtype: how --data and --val-data store ids (runtime/io/token_data.h)
  std::string save_shard_size;  // --save-shard-size; empty: Hugging Face's 5 GB
  std::string timeout, flight_dir;  // not in the launch fingerprint: they change no result
  std::string profile, profile_steps;  // --profile FILE, --profile-steps A:B (tools/train_profile.h)
  int eval_every = -1, eval_batches = 4,  // eval_every -1: unset
      save_every = 0, log_every = 1;
  int steps = 20, grad_accum = 1;
  double lr = 1e-3, weight_decay = 0.0, momentum = 0.0, clip = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // torch.optim.AdamW's
  std::string lr_schedule = "constant";
  int64_t warmup_steps = 0, decay_steps = 0;  // decay_steps 0: --steps
  double min_lr = 0.0;
  bool no_sync = false;
  bool keep_gathered = false;
  uint64_t seed = 0;
};

}  // namespace fsdpc::cli
