// The built-in models, each capturable by name (`fsdpc trace --model NAME`).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "frontend/model.h"

namespace fsdpc {

struct ModelEntry {
  std::string name;
  std::string description;
};

const std::vector<ModelEntry>& model_catalog();
// Throws fsdpc::Error listing the known names when `name` is unknown.
std::unique_ptr<Model> make_model(const std::string& name);
// A model from a Hugging Face config.json: model_type "gpt2" (or none) makes
// a GPT2, "llama", "mistral" and "qwen2" a Llama; a LanguageModel either way.
std::unique_ptr<Model> make_model_from_config(const std::string& path);

}  // namespace fsdpc
