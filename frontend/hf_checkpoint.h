// Hugging Face checkpoints (GPT-2, Llama family) in and out: `--init PATH`
// loads each rank's shards straight from safetensors files (a file, or a
// folder with model.safetensors or a sharded model.safetensors.index.json),
// and `--save` writes model.safetensors (F32, Hugging Face names) and
// config.json. The model says what its names, tied head and ignored buffers
// are (LanguageModel).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "frontend/models/language_model.h"
#include "runtime/engine.h"
#include "runtime/io/safetensors.h"

namespace fsdpc {

// The tensors of a checkpoint, by name with any "transformer." prefix
// removed. Opening validates every file's header (fsdpc::Error on a bad one).
class HfWeights {
 public:
  explicit HfWeights(const std::string& path);
  // config.json beside the weights, or "" when there is none.
  const std::string& config_path() const { return config_path_; }
  struct Tensor {
    const SafetensorsFile* file;
    const SafetensorsEntry* entry;
  };
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }

 private:
  void add_file(const std::string& path, const std::map<std::string, std::string>* only);
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Tensor> tensors_;
  std::string config_path_;
};

// Checks names and shapes against the model before any data is read (every
// missing and unexpected tensor is listed; a shape mismatch names the tensor
// and both shapes), then fills this rank's shards. The model's buffers
// (is_ignored_buffer) are skipped; where the head is tied, lm_head.weight,
// when present, must equal the tensor it is tied to (each rank compares its
// own rows).
void load_hf_weights(Engine& engine, const LanguageModel& model, const HfWeights& weights);
// The name and shape checks of load_hf_weights alone.
void check_hf_weights(const LanguageModel& model, const HfWeights& weights);

// Hugging Face's default largest shard (save_pretrained's max_shard_size "5GB").
constexpr int64_t kDefaultHfShardBytes = 5'000'000'000;

// Rank 0 writes <dir>/config.json and the weights, each file to a temporary
// name renamed into place: model.safetensors when they fit in `shard_bytes`,
// else model-0000K-of-0000N.safetensors (tensors in name order, a new file
// whenever the next tensor would pass `shard_bytes`) and
// model.safetensors.index.json, as save_pretrained lays them out. Files of
// the other layout left in <dir> by an earlier save are removed, so a load
// never mixes the two. Collective (gathers the parameters). Returns the
// weight files written (names in <dir>; empty on other ranks).
std::vector<std::string> save_hf_checkpoint(Engine& engine, const LanguageModel& model, const std::string& dir,
                                            int64_t shard_bytes = kDefaultHfShardBytes);
// <dir>/config.json alone (a sharded checkpoint still names its model).
void save_hf_config(const LanguageModel& model, const std::string& dir);

}  // namespace fsdpc
