// GPT-2's attention, MLP and block.
#include "frontend/models/transformer.h"

#include <cmath>

#include "ir/error.h"

namespace fsdpc {

namespace {
// GPT-2 scales the residual projections so the residual stream's variance
// does not grow with depth.
double residual_std(int64_t n_layer) { return 0.02 / std::sqrt(2.0 * static_cast<double>(n_layer)); }
}  // namespace

CausalSelfAttention::CausalSelfAttention(int64_t n_embd, int64_t n_head, int64_t n_layer)
    : n_embd_(n_embd), n_head_(n_head) {
  if (n_head <= 0 || n_embd % n_head != 0)
    fail("attention: n_embd ", n_embd, " is not divisible by n_head ", n_head);
  c_attn_ = &register_module("c_attn", std::make_unique<Conv1D>(n_embd, 3 * n_embd));
  c_proj_ = &register_module("c_proj", std::make_unique<Conv1D>(n_embd, n_embd, residual_std(n_layer)));
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  if (x.rank() != 3 || x.size(2) != n_embd_)
    fail("attention: expected input [B, T, ", n_embd_, "], got ", shape_str(x.shape()));
  int64_t B = x.size(0), T = x.size(1), D = n_embd_ / n_head_;
  Tensor qkv = c_attn_->forward(x);  // [B, T, 3C]
  std::vector<Tensor> parts = split(qkv, n_embd_, 2);
  auto heads = [&](const Tensor& t) { return transpose(reshape(t, {B, T, n_head_, D}), 1, 2); };
  // Separate statements: argument evaluation order would make the trace's
  // statement order compiler-dependent.
  Tensor q = heads(parts[0]);
  Tensor k = heads(parts[1]);
  Tensor v = heads(parts[2]);
  Tensor y = scaled_dot_product_attention(q, k, v, /*is_causal=*/true,
                                          1.0 / std::sqrt(static_cast<double>(D)));
  y = reshape(transpose(y, 1, 2), {B, T, n_embd_});
  return c_proj_->forward(y);
}

MLP::MLP(int64_t n_embd, int64_t n_layer) {
  c_fc_ = &register_module("c_fc", std::make_unique<Conv1D>(n_embd, 4 * n_embd));
  c_proj_ = &register_module("c_proj", std::make_unique<Conv1D>(4 * n_embd, n_embd, residual_std(n_layer)));
}

Tensor MLP::forward(const Tensor& x) { return c_proj_->forward(gelu(c_fc_->forward(x))); }

Block::Block(int64_t n_embd, int64_t n_head, int64_t n_layer, double eps) {
  ln_1_ = &register_module("ln_1", std::make_unique<LayerNorm>(n_embd, eps));
  attn_ = &register_module("attn", std::make_unique<CausalSelfAttention>(n_embd, n_head, n_layer));
  ln_2_ = &register_module("ln_2", std::make_unique<LayerNorm>(n_embd, eps));
  mlp_ = &register_module("mlp", std::make_unique<MLP>(n_embd, n_layer));
}

Tensor Block::forward(const Tensor& x) {
  Tensor h = x + attn_->forward(ln_1_->forward(x));
  return h + mlp_->forward(ln_2_->forward(h));
}

}  // namespace fsdpc
