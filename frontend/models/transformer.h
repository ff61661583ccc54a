// The GPT-2 transformer pieces, named exactly as Hugging Face names them so
// parameter paths match its checkpoints (attn.c_attn, mlp.c_fc, ln_1, ...).
#pragma once

#include "frontend/layers.h"

namespace fsdpc {

// Multi-head causal self-attention: one fused qkv projection (c_attn),
// scaled dot-product attention with scale 1/sqrt(head_dim), output
// projection (c_proj, initialised with std 0.02/sqrt(2·n_layer)).
class CausalSelfAttention : public Layer {
 public:
  CausalSelfAttention(int64_t n_embd, int64_t n_head, int64_t n_layer);
  Tensor forward(const Tensor& x) override;  // x: [B, T, C]

 private:
  int64_t n_embd_, n_head_;
  Conv1D* c_attn_;
  Conv1D* c_proj_;
};

// The feed-forward block: c_fc (C -> 4C), gelu, c_proj (4C -> C).
class MLP : public Layer {
 public:
  MLP(int64_t n_embd, int64_t n_layer);
  Tensor forward(const Tensor& x) override;

 private:
  Conv1D* c_fc_;
  Conv1D* c_proj_;
};

// A pre-LayerNorm transformer block: x + attn(ln_1(x)), then + mlp(ln_2(x)).
class Block : public Layer {
 public:
  Block(int64_t n_embd, int64_t n_head, int64_t n_layer, double eps);
  Tensor forward(const Tensor& x) override;

 private:
  LayerNorm* ln_1_;
  CausalSelfAttention* attn_;
  LayerNorm* ln_2_;
  MLP* mlp_;
};

}  // namespace fsdpc
