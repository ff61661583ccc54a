// The Llama family's registration (frontend/models/families.def): Llama,
// Mistral and Qwen2 config.json files, and the presets, as their Hugging
// Face repositories publish them.
#include "frontend/models/llama/llama.h"
#include "frontend/models/registry.h"

namespace fsdpc {

namespace {

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

ModelPreset preset(const char* name, const char* description, const LlamaConfig& config) {
  return {name, description, [name, config] { return std::make_unique<Llama>(name, config); }};
}

}  // namespace

ModelFamily llama_family() {
  // For tests: byte vocabulary; sizes that leave remainders when sharded over
  // 3 or 4 ranks (54, 94, 16 rows); 6 query heads sharing 2 k/v heads; an
  // explicit head_dim 8 that is not hidden_size / heads.
  LlamaConfig tiny = llama_preset(256, 54, 94, 2, 6, 2, 64, 1e-5, 10000.0, false);
  tiny.head_dim = 8;
  LlamaConfig llama32 = llama_preset(128256, 2048, 8192, 16, 32, 8, 131072, 1e-5, 500000.0, true);
  llama32.head_dim = 64;
  llama32.rope_scaling = Llama3RopeScaling{32.0, 1.0, 4.0, 8192};

  ModelFamily f;
  f.name = "llama";
  f.display = "Llama";
  f.model_types = {{"llama", "Llama"}, {"mistral", "Mistral"}, {"qwen2", "Qwen2"}};
  f.presets = {
      preset("llama-tiny", "Llama, 2 layers, 54 wide, 6 heads of 8 sharing 2 k/v heads, MLP 94, vocab 256, context 64",
             tiny),
      preset("smollm-135m", "SmolLM-135M: 30 layers, 576 wide, 9 heads / 3 k/v, tied head, context 2048",
             llama_preset(49152, 576, 1536, 30, 9, 3, 2048, 1e-5, 10000.0, true)),
      preset("tinyllama-1.1b", "TinyLlama-1.1B: 22 layers, 2048 wide, 32 heads / 4 k/v, context 2048",
             llama_preset(32000, 2048, 5632, 22, 32, 4, 2048, 1e-5, 10000.0, false)),
      preset("llama3.2-1b", "Llama-3.2-1B: 16 layers, 2048 wide, 32 heads / 8 k/v, tied head, llama3 RoPE scaling",
             llama32),
      preset("llama3-8b", "Llama-3-8B: 32 layers, 4096 wide, 32 heads / 8 k/v, context 8192",
             llama_preset(128256, 4096, 14336, 32, 32, 8, 8192, 1e-5, 500000.0, false)),
  };
  // The model is named by its model_type, as the checkpoint's family.
  f.from_config = [](const std::string& model_type, const std::string& path) -> std::unique_ptr<Model> {
    return std::make_unique<Llama>(model_type, llama_config_from_file(path));
  };
  f.tensor_parallel_plan = llama_tensor_parallel_plan();
  return f;
}

}  // namespace fsdpc
