// The configuration of a Llama-family model (Hugging Face's LlamaForCausalLM,
// MistralForCausalLM without a sliding window, Qwen2ForCausalLM), read from
// its config.json as transformers 4.x writes it (top-level rope_theta and
// rope_scaling) or 5.x (rope_parameters), and written back the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fsdpc {

// rope_type "llama3" (Llama 3.1/3.2): long wavelengths slowed by `factor`,
// short ones kept, a smooth blend between.
struct Llama3RopeScaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct LlamaConfig {
  std::string model_type = "llama";  // "llama", "mistral" or "qwen2": names the architecture on save
  int64_t vocab_size = 32000;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t num_hidden_layers = 32;
  int64_t num_attention_heads = 32;
  int64_t num_key_value_heads = 32;  // < num_attention_heads: grouped-query attention
  int64_t head_dim = 0;              // 0: hidden_size / num_attention_heads
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  std::optional<Llama3RopeScaling> rope_scaling;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;    // bias on q/k/v_proj (Qwen2; Llama's attention_bias)
  bool o_bias = false;      // bias on o_proj (Llama's attention_bias)
  bool mlp_bias = false;    // bias on gate/up/down_proj (Llama's mlp_bias)
  // Mistral's (and Qwen2's, with use_sliding_window) window: a sequence
  // longer than it is refused, since this model attends to the whole prefix.
  std::optional<int64_t> sliding_window;
  double initializer_range = 0.02;

  int64_t head_size() const { return head_dim > 0 ? head_dim : hidden_size / num_attention_heads; }
};

// Throws fsdpc::Error naming the field when a value is out of range.
void validate(const LlamaConfig& config);

// Parses config.json text. `where` prefixes every message (the file's path).
// Unknown fields are ignored; fields that change the math and are not
// supported (another hidden_act, rope_scaling of type linear/dynamic/yarn/...,
// attention dropout, partial rotary) are refused by name.
LlamaConfig llama_config_from_json_text(const std::string& text, const std::string& where);
LlamaConfig llama_config_from_file(const std::string& path);
// config.json text for `config` (transformers 4.x field names, which 5.x
// also reads), with the architecture its model_type names.
std::string llama_config_json(const LlamaConfig& config);

// Hugging Face's inverse frequencies in float32, as LlamaRotaryEmbedding
// computes them: 1 / theta^(arange(0, d, 2) / d), then the llama3
// adjustment when configured. head_size()/2 values.
std::vector<float> rope_inv_freq(const LlamaConfig& config);

}  // namespace fsdpc
