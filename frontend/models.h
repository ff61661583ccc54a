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
// A GPT-2 from a Hugging Face config.json.
std::unique_ptr<Model> make_model_from_config(const std::string& path);

}  // namespace fsdpc
