// Built-in model presets: the FSDP tutorial MLP and the GPT-2 family.
#include "frontend/models.h"

#include "frontend/gpt2.h"
#include "frontend/layers.h"
#include "ir/error.h"

namespace fsdpc {

namespace {
struct Gpt2Preset {
  const char* name;
  GPT2Config config;
};

// Sizes as published for the GPT-2 family (and a tiny one for tests).
const Gpt2Preset kGpt2Presets[] = {
    {"gpt2-tiny", {2, 2, 64, 256, 64, 1e-5}},
    {"gpt2", {12, 12, 768, 50257, 1024, 1e-5}},
    {"gpt2-medium", {24, 16, 1024, 50257, 1024, 1e-5}},
    {"gpt2-large", {36, 20, 1280, 50257, 1024, 1e-5}},
    {"gpt2-xl", {48, 25, 1600, 50257, 1024, 1e-5}},
};

// The model of the Thunder/PyTorch FSDP tutorial:
// Linear(64, 64, bias=False) -> Tanh -> Linear(64, 64, bias=False).
std::unique_ptr<Model> make_mlp() {
  auto seq = std::make_unique<Sequential>();
  seq->add(std::make_unique<Linear>(64, 64, /*bias=*/false));
  seq->add(std::make_unique<Tanh>());
  seq->add(std::make_unique<Linear>(64, 64, /*bias=*/false));
  return std::make_unique<LayerModel>("mlp", std::move(seq), Shape{64}, /*default_batch=*/64);
}
}  // namespace

const std::vector<ModelEntry>& model_catalog() {
  static const std::vector<ModelEntry> kCatalog = {
      {"mlp", "FSDP tutorial: Linear(64,64,bias=False) -> Tanh -> Linear(64,64,bias=False), x [64, 64]"},
      {"gpt2-tiny", "GPT-2, 2 layers, 2 heads, 64 wide, vocab 256, context 64"},
      {"gpt2", "GPT-2 124M: 12 layers, 12 heads, 768 wide, context 1024"},
      {"gpt2-medium", "GPT-2 350M: 24 layers, 16 heads, 1024 wide"},
      {"gpt2-large", "GPT-2 774M: 36 layers, 20 heads, 1280 wide"},
      {"gpt2-xl", "GPT-2 1.5B: 48 layers, 25 heads, 1600 wide"},
  };
  return kCatalog;
}

std::unique_ptr<Model> make_model(const std::string& name) {
  if (name == "mlp") return make_mlp();
  for (const Gpt2Preset& p : kGpt2Presets)
    if (name == p.name) return std::make_unique<GPT2>(p.name, p.config);
  std::string known;
  for (const ModelEntry& e : model_catalog()) known += (known.empty() ? "" : ", ") + e.name;
  fail("unknown model '", name, "' (known: ", known, ")");
}

std::unique_ptr<Model> make_model_from_config(const std::string& path) {
  return std::make_unique<GPT2>("gpt2", gpt2_config_from_file(path));
}

}  // namespace fsdpc
