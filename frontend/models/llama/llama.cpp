// The Llama model: its layers, rotary embeddings and config hooks.
#include "frontend/models/llama/llama.h"

#include <cmath>
#include <cstdio>

#include "ir/error.h"

namespace fsdpc {

namespace {

// nn.Linear as Hugging Face initialises it for Llama: weight [out, in]
// ~ normal(0, initializer_range), bias (where configured) 0.
class Projection : public Layer {
 public:
  Projection(int64_t in, int64_t out, bool bias, double init_std) : bias_(bias) {
    register_param("weight", {out, in}, Init::normal(init_std));
    if (bias_) register_param("bias", {out}, Init::zeros());
  }
  Tensor forward(const Tensor& x) override {
    return bias_ ? linear(x, param("weight"), param("bias")) : linear(x, param("weight"));
  }

 private:
  bool bias_;
};

// LlamaRMSNorm: weight 1.
class RMSNorm : public Layer {
 public:
  RMSNorm(int64_t features, double eps) : eps_(eps) { register_param("weight", {features}, Init::ones()); }
  Tensor forward(const Tensor& x) override { return rms_norm(x, param("weight"), eps_); }

 private:
  double eps_;
};

class Attention : public Module {
 public:
  explicit Attention(const LlamaConfig& c)
      : heads_(c.num_attention_heads), kv_heads_(c.num_key_value_heads), head_size_(c.head_size()) {
    const int64_t C = c.hidden_size, q = heads_ * head_size_, kv = kv_heads_ * head_size_;
    const double s = c.initializer_range;
    q_proj_ = &register_module("q_proj", std::make_unique<Projection>(C, q, c.qkv_bias, s));
    k_proj_ = &register_module("k_proj", std::make_unique<Projection>(C, kv, c.qkv_bias, s));
    v_proj_ = &register_module("v_proj", std::make_unique<Projection>(C, kv, c.qkv_bias, s));
    o_proj_ = &register_module("o_proj", std::make_unique<Projection>(q, C, c.o_bias, s));
  }

  // x [B, T, C]; cos/sin [T, head_size].
  Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin) {
    const int64_t B = x.size(0), T = x.size(1), D = head_size_;
    auto heads = [&](const Tensor& t, int64_t n) { return transpose(reshape(t, {B, T, n, D}), 1, 2); };
    // Separate statements: the trace's order must not depend on the
    // compiler's order of evaluating arguments.
    Tensor q = heads(q_proj_->forward(x), heads_);
    Tensor k = heads(k_proj_->forward(x), kv_heads_);
    Tensor v = heads(v_proj_->forward(x), kv_heads_);
    q = apply_rope(q, cos, sin);
    k = apply_rope(k, cos, sin);
    k = repeat_kv(k);
    v = repeat_kv(v);
    Tensor y = scaled_dot_product_attention(q, k, v, /*is_causal=*/true, 1.0 / std::sqrt(static_cast<double>(D)));
    return o_proj_->forward(reshape(transpose(y, 1, 2), {B, T, heads_ * D}));
  }

 private:
  // [B, kv_heads, T, D] -> [B, heads, T, D], each k/v head serving
  // heads/kv_heads consecutive query heads (Hugging Face's repeat_kv).
  Tensor repeat_kv(const Tensor& t) const {
    const int64_t rep = heads_ / kv_heads_;
    if (rep == 1) return t;
    const int64_t B = t.size(0), T = t.size(2), D = t.size(3);
    Tensor wide = broadcast_to(reshape(t, {B, kv_heads_, 1, T, D}), {B, kv_heads_, rep, T, D});
    return reshape(wide, {B, heads_, T, D});
  }

  int64_t heads_, kv_heads_, head_size_;
  Projection *q_proj_, *k_proj_, *v_proj_, *o_proj_;
};

// down_proj(silu(gate_proj(x)) * up_proj(x)).
class GatedMLP : public Layer {
 public:
  explicit GatedMLP(const LlamaConfig& c) {
    const double s = c.initializer_range;
    gate_ = &register_module("gate_proj", std::make_unique<Projection>(c.hidden_size, c.intermediate_size, c.mlp_bias, s));
    up_ = &register_module("up_proj", std::make_unique<Projection>(c.hidden_size, c.intermediate_size, c.mlp_bias, s));
    down_ = &register_module("down_proj", std::make_unique<Projection>(c.intermediate_size, c.hidden_size, c.mlp_bias, s));
  }
  Tensor forward(const Tensor& x) override {
    Tensor gate = silu(gate_->forward(x));
    Tensor up = up_->forward(x);
    return down_->forward(gate * up);
  }

 private:
  Projection *gate_, *up_, *down_;
};

class DecoderLayer : public Module {
 public:
  explicit DecoderLayer(const LlamaConfig& c) {
    input_norm_ = &register_module("input_layernorm", std::make_unique<RMSNorm>(c.hidden_size, c.rms_norm_eps));
    attn_ = &register_module("self_attn", std::make_unique<Attention>(c));
    post_norm_ = &register_module("post_attention_layernorm", std::make_unique<RMSNorm>(c.hidden_size, c.rms_norm_eps));
    mlp_ = &register_module("mlp", std::make_unique<GatedMLP>(c));
  }
  Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin) {
    Tensor h = x + attn_->forward(input_norm_->forward(x), cos, sin);
    return h + mlp_->forward(post_norm_->forward(h));
  }

 private:
  RMSNorm* input_norm_;
  Attention* attn_;
  RMSNorm* post_norm_;
  GatedMLP* mlp_;
};

// nn.ModuleList: children named "0", "1", ...
class DecoderLayers : public Module {
 public:
  DecoderLayer& add(std::unique_ptr<DecoderLayer> layer) {
    layers_.push_back(&register_module(std::to_string(layers_.size()), std::move(layer)));
    return *layers_.back();
  }
  const std::vector<DecoderLayer*>& layers() const { return layers_; }

 private:
  std::vector<DecoderLayer*> layers_;
};

}  // namespace

// LlamaModel: the embedding, the decoder layers and the final norm.
class LlamaBody : public Module {
 public:
  explicit LlamaBody(const LlamaConfig& c) : config_(c) {
    embed_ = &register_module("embed_tokens",
                              std::make_unique<Embedding>(c.vocab_size, c.hidden_size, c.initializer_range));
    layers_ = &register_module("layers", std::make_unique<DecoderLayers>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers_->add(std::make_unique<DecoderLayer>(c));
    norm_ = &register_module("norm", std::make_unique<RMSNorm>(c.hidden_size, c.rms_norm_eps));
  }
  // Final hidden states [B, T, C] for idx [B, T].
  Tensor forward(const Tensor& idx) {
    auto [cos, sin] = rope_tables(idx.tracer(), config_, idx.size(1));
    Tensor x = embed_->forward(idx);
    for (DecoderLayer* layer : layers_->layers()) x = layer->forward(x, cos, sin);
    return norm_->forward(x);
  }
  const Tensor& embedding() const { return embed_->weight(); }

 private:
  LlamaConfig config_;
  Embedding* embed_;
  DecoderLayers* layers_;
  RMSNorm* norm_;
};

std::pair<Tensor, Tensor> rope_tables(Tracer& tracer, const LlamaConfig& config, int64_t T) {
  // inv_freq is a constant of the config: its values enter the trace as
  // literals, computed on the host exactly as transformers does in float32.
  std::vector<Tensor> parts;
  for (float f : rope_inv_freq(config)) parts.push_back(full(tracer, {1}, static_cast<double>(f)));
  const auto half = static_cast<int64_t>(parts.size());
  Tensor inv_freq = parts.size() == 1 ? parts[0] : cat(parts, 0);             // [D/2]
  Tensor positions = arange(tracer, T, DType::f32);                           // [T]
  // Separate statements: operands of * are evaluated in an unspecified order.
  Tensor column = reshape(positions, {T, 1});
  Tensor row = reshape(inv_freq, {1, half});
  Tensor freqs = column * row;                                                // [T, D/2]
  Tensor emb = cat({freqs, freqs}, 1);                                        // [T, D]
  Tensor c = cos(emb);
  Tensor s = sin(emb);
  return {c, s};
}

Tensor apply_rope(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  const int64_t D = x.size(-1);
  Tensor x1 = slice(x, -1, 0, D / 2);
  Tensor x2 = slice(x, -1, D / 2, D);
  Tensor rotated = cat({-x2, x1}, -1);
  Tensor a = x * cos;
  Tensor b = rotated * sin;
  return a + b;
}

Llama::Llama(std::string name, const LlamaConfig& config) : name_(std::move(name)), config_(config) {
  validate(config_);
  model_ = &register_module("model", std::make_unique<LlamaBody>(config_));
  if (!config_.tie_word_embeddings)
    lm_head_ = &register_module("lm_head", std::make_unique<Projection>(config_.hidden_size, config_.vocab_size,
                                                                        false, config_.initializer_range));
}

std::vector<ModelInput> Llama::inputs(const CaptureOptions& options) const {
  const int64_t batch = options.batch.value_or(2);
  const int64_t seq = options.seq.value_or(std::min<int64_t>(config_.max_position_embeddings, 2048));
  if (batch <= 0) fail("batch size must be positive, got ", batch);
  if (seq <= 0 || seq > config_.max_position_embeddings)
    fail("sequence length ", seq, " is outside [1, ", config_.max_position_embeddings,
         "] (the model's max_position_embeddings)");
  if (config_.sliding_window && *config_.sliding_window < seq)
    fail(name_, ": sliding_window ", *config_.sliding_window, " is smaller than the sequence length ", seq,
         "; sliding-window attention is not supported (use --seq ", *config_.sliding_window,
         " or less, where it equals full causal attention)");
  return {ModelInput{"idx", {batch, seq}, DType::i64}, ModelInput{"targets", {batch, seq}, DType::i64}};
}

Tensor Llama::logits(const Tensor& idx) {
  Tensor h = model_->forward(idx);
  return lm_head_ ? lm_head_->forward(h) : linear(h, model_->embedding());
}

std::vector<Tensor> Llama::forward(const std::vector<Tensor>& inputs) {
  return {cross_entropy(logits(inputs.at(0)), inputs.at(1))};
}

std::string Llama::hf_config_json() const { return llama_config_json(config_); }

std::string Llama::config_summary() const {
  // The config.json text names every field that changes the math.
  std::string s = llama_config_json(config_);
  for (char& ch : s)
    if (ch == '\n') ch = ' ';
  return s;
}

std::string Llama::tied_head() const { return config_.tie_word_embeddings ? "model.embed_tokens.weight" : ""; }

bool Llama::is_ignored_buffer(const std::string& name) const {
  const std::string suffix = ".rotary_emb.inv_freq";
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace fsdpc
