// The Llama family (Hugging Face's LlamaForCausalLM; Mistral without a
// sliding window; Qwen2 with its q/k/v biases) with Hugging Face's parameter
// names and shapes, so checkpoints map one to one:
//   model.embed_tokens.weight
//   model.layers.N.input_layernorm.weight
//   model.layers.N.self_attn.{q,k,v,o}_proj.weight (+ .bias where configured)
//   model.layers.N.post_attention_layernorm.weight
//   model.layers.N.mlp.{gate,up,down}_proj.weight
//   model.norm.weight
//   lm_head.weight (absent when tie_word_embeddings: the head is embed_tokens)
// RMSNorm, rotary embeddings in the rotate-half layout (cos/sin of
// positions x inv_freq computed in the trace from iota, so any length works),
// grouped-query attention (k/v heads repeated), SiLU-gated MLP, causal
// attention; the loss is the mean cross-entropy over all tokens, as GPT-2's.
// Each model.layers.N is one FSDP unit under the "block" wrap policy.
#pragma once

#include <string>

#include "frontend/layers.h"
#include "frontend/models/language_model.h"
#include "frontend/models/llama/llama_config.h"

namespace fsdpc {

class LlamaBody;

// The Llama family's tensor-parallel plan (llama_tensor_parallel_plan.cpp),
// by its parameter names.
TensorParallelPlan llama_tensor_parallel_plan();

class Llama : public LanguageModel {
 public:
  Llama(std::string name, const LlamaConfig& config);
  std::string name() const override { return name_; }
  const LlamaConfig& config() const { return config_; }
  // idx and targets: i64 [batch, seq]; default batch 2, seq the context up
  // to 2048. A sequence longer than a sliding window is refused.
  std::vector<ModelInput> inputs(const CaptureOptions& options) const override;
  // Returns the loss.
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
  Tensor logits(const Tensor& idx) override;
  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t context_length() const override { return config_.max_position_embeddings; }
  std::string hf_config_json() const override;
  std::string config_summary() const override;
  std::string tied_head() const override;
  // rotary_emb.inv_freq: a buffer older exports store.
  bool is_ignored_buffer(const std::string& name) const override;
  TensorParallelPlan tensor_parallel_plan() const override { return llama_tensor_parallel_plan(); }

 private:
  std::string name_;
  LlamaConfig config_;
  LlamaBody* model_;
  Layer* lm_head_ = nullptr;  // null when tied to model.embed_tokens
};

// Rotary embedding tables for positions 0..T-1: cos and sin, each [T, head_size],
// recorded on `tracer` (both halves repeat the same angles, as Hugging Face's
// cat((freqs, freqs), -1)).
std::pair<Tensor, Tensor> rope_tables(Tracer& tracer, const LlamaConfig& config, int64_t T);
// x * cos + rotate_half(x) * sin for x [..., T, head_size].
Tensor apply_rope(const Tensor& x, const Tensor& cos, const Tensor& sin);

}  // namespace fsdpc
