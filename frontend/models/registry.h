// The model families and their built-in models, each capturable by name
// (`fsdpc trace --model NAME`) or from a Hugging Face config.json.
//
// A family lives in its own folder, frontend/models/<family>/ (torchtitan's
// layout): its model class, config reader, presets and tensor-parallel
// plan, and a `ModelFamily <family>_family()` that describes it. Registering
// it is its one row in frontend/models/families.def; the catalog, the
// config.json dispatch, the tp plan of a trace file and the CLI's help
// texts are all read off these rows.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "frontend/model.h"
#include "passes/tensor_parallel_plan.h"

namespace fsdpc {

// A built-in model: `fsdpc models` lists it, make_model(name) builds it.
struct ModelPreset {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<Model>()> make;
};

// A config.json "model_type" a family reads, and how help texts name it.
struct HfModelType {
  std::string model_type;  // "mistral"
  std::string display;     // "Mistral"
};

struct ModelFamily {
  std::string name;     // "llama": its folder
  std::string display;  // "Llama": in help texts
  // The model_types its config reader takes (Llama: llama, mistral, qwen2);
  // empty for a family with no Hugging Face counterpart (the tutorial mlp).
  std::vector<HfModelType> model_types;
  // A config.json without model_type is this family's (GPT-2's: older
  // exports wrote none). At most one family says so.
  bool reads_untyped_config = false;
  std::vector<ModelPreset> presets;  // in `fsdpc models` order
  // The model of a config.json whose model_type is one of model_types (or
  // "" when reads_untyped_config); null when model_types is empty.
  std::function<std::unique_ptr<Model>(const std::string& model_type, const std::string& path)> from_config;
  // The family's tensor-parallel plan, the one its models' own
  // tensor_parallel_plan() returns; empty: --tp cuts nothing.
  TensorParallelPlan tensor_parallel_plan;
};

// Every registered family, in families.def's order.
const std::vector<ModelFamily>& model_families();

struct ModelEntry {
  std::string name;
  std::string description;
};

// Every preset of every family, in registry order.
const std::vector<ModelEntry>& model_catalog();
// Throws fsdpc::Error listing the known names when `name` is unknown.
std::unique_ptr<Model> make_model(const std::string& name);
// A model from a Hugging Face config.json, by its model_type (none: the
// family that reads untyped configs, GPT-2); a LanguageModel for every
// registered family. Throws fsdpc::Error listing the supported types.
std::unique_ptr<Model> make_model_from_config(const std::string& path);
// Every family's rules together: the plan for a trace read from a file,
// which names no family (each family's parameter names are its own).
TensorParallelPlan registered_tensor_parallel_plan();

// Help texts, from the registry: the model_types a config.json may name
// ("gpt2, llama, mistral or qwen2"), the architectures Hugging Face weights
// may be of ("GPT-2, Llama, Mistral, Qwen2"), and the families with
// Hugging Face checkpoints ("GPT-2 or Llama").
std::string supported_model_types_text();
std::string supported_architectures_text();
std::string supported_families_text();

}  // namespace fsdpc
