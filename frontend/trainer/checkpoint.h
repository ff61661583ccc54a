// A training run's files: the --save-state dump, the resumable checkpoint
// (--save, --save-every, a preemption's save), --resume and --init's check
// of the digests a checkpoint records.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "frontend/models/language_model.h"
#include "runtime/engine.h"

namespace fsdpc {

// --save-state FILE: the trained parameters as JSON (name: shape and data).
void save_state(const std::string& path, const std::map<std::string, HostTensor>& state);

// A resumable checkpoint: the Hugging Face export in DIR (model.safetensors,
// config.json), and each rank's shards and optimizer state in
// DIR/state/step-N, written under a temporary name and renamed into place
// once every rank's file is complete; DIR/state/latest then names it. A run
// killed mid-save leaves the previous checkpoint and `latest` intact.
// `full`: also the gathered export (rank 0 holds the whole model for it).
// `shard_bytes`: the largest Hugging Face weight file (--save-shard-size).
void save_checkpoint(Engine& engine, const LanguageModel& model, const std::string& dir, int64_t next_step, bool full,
                     int64_t shard_bytes);

// The step a --resume DIR continues from, after restoring every rank's state
// (its files' digests verified first, on every rank).
int64_t resume_checkpoint(Engine& engine, const std::string& dir);

// --init PATH: the digests a SHA256SUMS beside the weights records (fsdpc
// --save writes one; Hugging Face downloads have none and load unchecked).
void verify_init(const std::string& path);

}  // namespace fsdpc
