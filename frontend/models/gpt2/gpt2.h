// GPT-2 with Hugging Face's parameter names and shapes, so its checkpoints
// map one to one: wte, wpe, h.{i}.{ln_1,attn,ln_2,mlp}, ln_f; the output
// head is tied to wte; the loss is the mean cross-entropy over all tokens.
#pragma once

#include <string>

#include "frontend/models/language_model.h"
#include "frontend/models/transformer.h"

namespace fsdpc {

struct GPT2Config {
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_embd = 768;
  int64_t vocab_size = 50257;
  int64_t n_positions = 1024;
  double layer_norm_epsilon = 1e-5;
};

// Throws fsdpc::Error naming the field when a value is out of range.
void validate(const GPT2Config& config);
// Reads a Hugging Face config.json (n_layer, n_head, n_embd, vocab_size,
// n_positions, optional layer_norm_epsilon); errors name the file and key.
GPT2Config gpt2_config_from_file(const std::string& path);
// GPT-2's tensor-parallel plan (gpt2_tensor_parallel_plan.cpp), by its
// parameter names.
TensorParallelPlan gpt2_tensor_parallel_plan();

class GPT2 : public LanguageModel {
 public:
  GPT2(std::string name, const GPT2Config& config);
  std::string name() const override { return name_; }
  const GPT2Config& config() const { return config_; }
  // idx and targets: i64 [batch, seq]; default batch 2, seq the full context.
  std::vector<ModelInput> inputs(const CaptureOptions& options) const override;
  // Returns the loss.
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
  // Logits [B, T, vocab] for token ids idx [B, T].
  Tensor logits(const Tensor& idx) override;
  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t context_length() const override { return config_.n_positions; }
  std::string hf_config_json() const override;
  std::string config_summary() const override;
  std::string tied_head() const override { return "wte.weight"; }
  // attn.bias and attn.masked_bias: the causal mask, stored by older exports.
  bool is_ignored_buffer(const std::string& name) const override;
  TensorParallelPlan tensor_parallel_plan() const override { return gpt2_tensor_parallel_plan(); }

 private:
  std::string name_;
  GPT2Config config_;
  Embedding* wte_;
  Embedding* wpe_;
  Sequential* h_;
  LayerNorm* ln_f_;
};

}  // namespace fsdpc
