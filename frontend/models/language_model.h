// A LanguageModel is a Model over token ids with a Hugging Face counterpart:
// what training on text, checkpoints in Hugging Face's layout and sampling
// need to know of a model, whatever its architecture (GPT-2, Llama). The
// tools and the checkpoint code see models through this interface only.
#pragma once

#include <string>

#include "frontend/model.h"

namespace fsdpc {

class LanguageModel : public Model {
 public:
  // Logits [B, T, vocab] for token ids idx [B, T] (i64).
  virtual Tensor logits(const Tensor& idx) = 0;
  virtual int64_t vocab_size() const = 0;
  // The longest context the model takes (n_positions, max_position_embeddings).
  virtual int64_t context_length() const = 0;
  // config.json as Hugging Face writes it for this model (JSON text).
  virtual std::string hf_config_json() const = 0;
  // Every config field that changes the math, on one line (the launch check
  // compares it across ranks).
  virtual std::string config_summary() const = 0;
  // The parameter a checkpoint's lm_head.weight is tied to ("wte.weight"),
  // or "" when the model has its own head (then lm_head.weight is a parameter).
  virtual std::string tied_head() const = 0;
  // Checkpoint tensors that are buffers, not parameters, and are skipped
  // (GPT-2's attn.bias, Llama's rotary_emb.inv_freq).
  virtual bool is_ignored_buffer(const std::string& name) const = 0;
};

}  // namespace fsdpc
