// The registry of model families (frontend/models/registry.h): the table
// families.def names, and everything read off it.
#include "frontend/models/registry.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "ir/error.h"

namespace fsdpc {

// Each family's description, defined in its folder.
#define FSDPC_MODEL_FAMILY(name) ModelFamily name##_family();
#include "frontend/models/families.def"
#undef FSDPC_MODEL_FAMILY

const std::vector<ModelFamily>& model_families() {
  static const std::vector<ModelFamily> kFamilies = {
#define FSDPC_MODEL_FAMILY(name) name##_family(),
#include "frontend/models/families.def"
#undef FSDPC_MODEL_FAMILY
  };
  return kFamilies;
}

const std::vector<ModelEntry>& model_catalog() {
  static const std::vector<ModelEntry> kCatalog = [] {
    std::vector<ModelEntry> out;
    for (const ModelFamily& f : model_families())
      for (const ModelPreset& p : f.presets) out.push_back({p.name, p.description});
    return out;
  }();
  return kCatalog;
}

std::unique_ptr<Model> make_model(const std::string& name) {
  for (const ModelFamily& f : model_families())
    for (const ModelPreset& p : f.presets)
      if (name == p.name) return p.make();
  std::string known;
  for (const ModelEntry& e : model_catalog()) known += (known.empty() ? "" : ", ") + e.name;
  fail("unknown model '", name, "' (known: ", known, ")");
}

std::unique_ptr<Model> make_model_from_config(const std::string& path) {
  // model_type picks the family; the family's reader checks the rest.
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open config file");
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) fail(path, ": not a JSON object");
  const auto type = j.find("model_type");
  for (const ModelFamily& f : model_families()) {
    if (type == j.end()) {
      if (f.reads_untyped_config) return f.from_config("", path);
      continue;
    }
    if (!type->is_string()) break;
    for (const HfModelType& t : f.model_types)
      if (*type == t.model_type) return f.from_config(t.model_type, path);
  }
  std::string supported;
  for (const ModelFamily& f : model_families())
    for (const HfModelType& t : f.model_types) supported += (supported.empty() ? "\"" : ", \"") + t.model_type + "\"";
  if (type == j.end())
    fail(path, ": has no model_type, and no family reads such a config (supported: ", supported, ")");
  fail(path, ": model_type is ", type->dump(), ", not a supported model (supported: ", supported, ")");
}

TensorParallelPlan registered_tensor_parallel_plan() {
  TensorParallelPlan plan;
  for (const ModelFamily& f : model_families())
    plan.rules.insert(plan.rules.end(), f.tensor_parallel_plan.rules.begin(), f.tensor_parallel_plan.rules.end());
  return plan;
}

namespace {

// "a, b or c" (last_sep " or ") or "a, b, c" (last_sep ", ").
std::string join(const std::vector<std::string>& items, const std::string& last_sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? last_sep : ", ") + items[i];
  return out;
}

}  // namespace

std::string supported_model_types_text() {
  std::vector<std::string> types;
  for (const ModelFamily& f : model_families())
    for (const HfModelType& t : f.model_types) types.push_back(t.model_type);
  return join(types, " or ");
}

std::string supported_architectures_text() {
  std::vector<std::string> names;
  for (const ModelFamily& f : model_families())
    for (const HfModelType& t : f.model_types) names.push_back(t.display);
  return join(names, ", ");
}

std::string supported_families_text() {
  std::vector<std::string> names;
  for (const ModelFamily& f : model_families())
    if (!f.model_types.empty()) names.push_back(f.display);
  return join(names, " or ");
}

}  // namespace fsdpc
