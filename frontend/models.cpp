// Built-in model presets: the FSDP tutorial MLP, the GPT-2 family and the
// Llama family; config.json files of either family.
#include "frontend/models.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "frontend/gpt2.h"
#include "frontend/layers.h"
#include "frontend/llama.h"
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

struct LlamaPreset {
  const char* name;
  LlamaConfig config;
};

LlamaConfig llama_preset(int64_t vocab, int64_t hidden, int64_t intermediate, int64_t layers, int64_t heads,
                         int64_t kv_heads, int64_t positions, double eps, double theta, bool tied) {
  LlamaConfig c;
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.intermediate_size = intermediate;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.max_position_embeddings = positions;
  c.rms_norm_eps = eps;
  c.rope_theta = theta;
  c.tie_word_embeddings = tied;
  return c;
}

// The published configs (config.json of each Hugging Face repository).
std::vector<LlamaPreset> llama_presets() {
  // For tests: byte vocabulary; sizes that leave remainders when sharded over
  // 3 or 4 ranks (54, 94, 16 rows); 6 query heads sharing 2 k/v heads; an
  // explicit head_dim 8 that is not hidden_size / heads.
  LlamaConfig tiny = llama_preset(256, 54, 94, 2, 6, 2, 64, 1e-5, 10000.0, false);
  tiny.head_dim = 8;
  LlamaConfig llama32 = llama_preset(128256, 2048, 8192, 16, 32, 8, 131072, 1e-5, 500000.0, true);
  llama32.head_dim = 64;
  llama32.rope_scaling = Llama3RopeScaling{32.0, 1.0, 4.0, 8192};
  return {
      {"llama-tiny", tiny},
      {"smollm-135m", llama_preset(49152, 576, 1536, 30, 9, 3, 2048, 1e-5, 10000.0, true)},
      {"tinyllama-1.1b", llama_preset(32000, 2048, 5632, 22, 32, 4, 2048, 1e-5, 10000.0, false)},
      {"llama3.2-1b", llama32},
      {"llama3-8b", llama_preset(128256, 4096, 14336, 32, 32, 8, 8192, 1e-5, 500000.0, false)},
  };
}

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
      {"llama-tiny", "Llama, 2 layers, 54 wide, 6 heads of 8 sharing 2 k/v heads, MLP 94, vocab 256, context 64"},
      {"smollm-135m", "SmolLM-135M: 30 layers, 576 wide, 9 heads / 3 k/v, tied head, context 2048"},
      {"tinyllama-1.1b", "TinyLlama-1.1B: 22 layers, 2048 wide, 32 heads / 4 k/v, context 2048"},
      {"llama3.2-1b", "Llama-3.2-1B: 16 layers, 2048 wide, 32 heads / 8 k/v, tied head, llama3 RoPE scaling"},
      {"llama3-8b", "Llama-3-8B: 32 layers, 4096 wide, 32 heads / 8 k/v, context 8192"},
  };
  return kCatalog;
}

std::unique_ptr<Model> make_model(const std::string& name) {
  if (name == "mlp") return make_mlp();
  for (const Gpt2Preset& p : kGpt2Presets)
    if (name == p.name) return std::make_unique<GPT2>(p.name, p.config);
  for (const LlamaPreset& p : llama_presets())
    if (name == p.name) return std::make_unique<Llama>(p.name, p.config);
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
  if (type == j.end() || *type == "gpt2") return std::make_unique<GPT2>("gpt2", gpt2_config_from_file(path));
  if (*type == "llama" || *type == "mistral" || *type == "qwen2")
    return std::make_unique<Llama>(type->get<std::string>(), llama_config_from_file(path));
  fail(path, ": model_type is ", type->dump(),
       ", not a supported model (supported: \"gpt2\", \"llama\", \"mistral\", \"qwen2\")");
}

}  // namespace fsdpc
