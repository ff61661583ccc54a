// The GPT-2 model and its Hugging Face config.json reader.
#include "frontend/models/gpt2/gpt2.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ir/error.h"

namespace fsdpc {

void validate(const GPT2Config& c) {
  auto positive = [](const char* field, int64_t v) {
    if (v <= 0) fail("GPT-2 config: ", field, " must be positive, got ", v);
  };
  positive("n_layer", c.n_layer);
  positive("n_head", c.n_head);
  positive("n_embd", c.n_embd);
  positive("vocab_size", c.vocab_size);
  positive("n_positions", c.n_positions);
  if (c.n_embd % c.n_head != 0)
    fail("GPT-2 config: n_embd ", c.n_embd, " is not divisible by n_head ", c.n_head);
  if (!(c.layer_norm_epsilon > 0.0))
    fail("GPT-2 config: layer_norm_epsilon must be positive, got ", c.layer_norm_epsilon);
}

namespace {
int64_t json_int(const nlohmann::json& j, const std::string& path, const char* key) {
  if (!j.contains(key)) fail(path, ": missing key \"", key, "\"");
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer()) fail(path, ": \"", key, "\" must be an integer, got ", v.dump());
  return v.get<int64_t>();
}
}  // namespace

GPT2Config gpt2_config_from_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open config file");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) fail(path, ": not a JSON object");
  if (j.contains("model_type") && j["model_type"] != "gpt2")
    fail(path, ": model_type is ", j["model_type"].dump(), ", only \"gpt2\" is supported");
  if (j.contains("activation_function") && j["activation_function"] != "gelu_new")
    fail(path, ": activation_function is ", j["activation_function"].dump(),
         ", only \"gelu_new\" (GELU, tanh approximation) is supported");
  GPT2Config c;
  c.n_layer = json_int(j, path, "n_layer");
  c.n_head = json_int(j, path, "n_head");
  c.n_embd = json_int(j, path, "n_embd");
  c.vocab_size = json_int(j, path, "vocab_size");
  c.n_positions = json_int(j, path, "n_positions");
  if (j.contains("layer_norm_epsilon")) {
    if (!j["layer_norm_epsilon"].is_number()) fail(path, ": \"layer_norm_epsilon\" must be a number");
    c.layer_norm_epsilon = j["layer_norm_epsilon"].get<double>();
  }
  try {
    validate(c);
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
  return c;
}

GPT2::GPT2(std::string name, const GPT2Config& config) : name_(std::move(name)), config_(config) {
  validate(config_);
  const GPT2Config& c = config_;
  wte_ = &register_module("wte", std::make_unique<Embedding>(c.vocab_size, c.n_embd));
  wpe_ = &register_module("wpe", std::make_unique<Embedding>(c.n_positions, c.n_embd));
  h_ = &register_module("h", std::make_unique<Sequential>());
  for (int64_t i = 0; i < c.n_layer; ++i)
    h_->add(std::make_unique<Block>(c.n_embd, c.n_head, c.n_layer, c.layer_norm_epsilon));
  ln_f_ = &register_module("ln_f", std::make_unique<LayerNorm>(c.n_embd, c.layer_norm_epsilon));
}

std::vector<ModelInput> GPT2::inputs(const CaptureOptions& options) const {
  int64_t batch = options.batch.value_or(2);
  int64_t seq = options.seq.value_or(config_.n_positions);
  if (batch <= 0) fail("batch size must be positive, got ", batch);
  if (seq <= 0 || seq > config_.n_positions)
    fail("sequence length ", seq, " is outside [1, ", config_.n_positions, "] (the model's n_positions)");
  return {ModelInput{"idx", {batch, seq}, DType::i64}, ModelInput{"targets", {batch, seq}, DType::i64}};
}

Tensor GPT2::logits(const Tensor& idx) {
  int64_t T = idx.size(1);
  Tensor pos = wpe_->forward(arange(idx.tracer(), T, DType::i64));  // [T, C]
  Tensor x = wte_->forward(idx) + pos;                                // [B, T, C]
  x = ln_f_->forward(h_->forward(x));
  return linear(x, wte_->weight());  // the head is tied to wte
}

std::string GPT2::hf_config_json() const {
  const GPT2Config& c = config_;
  nlohmann::ordered_json j = {{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"},
                              {"activation_function", "gelu_new"}, {"n_layer", c.n_layer},
                              {"n_head", c.n_head}, {"n_embd", c.n_embd}, {"vocab_size", c.vocab_size},
                              {"n_positions", c.n_positions}, {"n_ctx", c.n_positions},
                              {"layer_norm_epsilon", c.layer_norm_epsilon}};
  return j.dump(2) + "\n";
}

std::string GPT2::config_summary() const {
  const GPT2Config& c = config_;
  char eps[32];
  std::snprintf(eps, sizeof eps, "%.17g", c.layer_norm_epsilon);
  return "n_layer " + std::to_string(c.n_layer) + ", n_head " + std::to_string(c.n_head) + ", n_embd " +
         std::to_string(c.n_embd) + ", vocab_size " + std::to_string(c.vocab_size) + ", n_positions " +
         std::to_string(c.n_positions) + ", layer_norm_epsilon " + eps;
}

bool GPT2::is_ignored_buffer(const std::string& name) const {
  auto ends_with = [&](const std::string& suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".attn.bias") || ends_with(".attn.masked_bias");
}

std::vector<Tensor> GPT2::forward(const std::vector<Tensor>& inputs) {
  return {cross_entropy(logits(inputs.at(0)), inputs.at(1))};
}

}  // namespace fsdpc
