// Reading and writing a Llama-family config.json, and RoPE's frequencies.
#include "frontend/models/llama/llama_config.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ir/error.h"

namespace fsdpc {

using nlohmann::json;

void validate(const LlamaConfig& c) {
  auto positive = [&](const char* field, int64_t v) {
    if (v <= 0) fail(c.model_type, " config: ", field, " must be positive, got ", v);
  };
  positive("vocab_size", c.vocab_size);
  positive("hidden_size", c.hidden_size);
  positive("intermediate_size", c.intermediate_size);
  positive("num_hidden_layers", c.num_hidden_layers);
  positive("num_attention_heads", c.num_attention_heads);
  positive("num_key_value_heads", c.num_key_value_heads);
  positive("max_position_embeddings", c.max_position_embeddings);
  if (c.head_dim < 0) fail(c.model_type, " config: head_dim must be positive, got ", c.head_dim);
  if (c.head_dim == 0 && c.hidden_size % c.num_attention_heads != 0)
    fail(c.model_type, " config: hidden_size ", c.hidden_size, " is not divisible by num_attention_heads ",
         c.num_attention_heads, " (give head_dim)");
  if (c.head_size() % 2 != 0)
    fail(c.model_type, " config: the head size ", c.head_size(), " is odd; rotary embeddings rotate pairs");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail(c.model_type, " config: num_attention_heads ", c.num_attention_heads,
         " is not a multiple of num_key_value_heads ", c.num_key_value_heads);
  if (!(c.rms_norm_eps > 0.0)) fail(c.model_type, " config: rms_norm_eps must be positive, got ", c.rms_norm_eps);
  if (!(c.rope_theta > 0.0)) fail(c.model_type, " config: rope_theta must be positive, got ", c.rope_theta);
  if (c.sliding_window && *c.sliding_window <= 0)
    fail(c.model_type, " config: sliding_window must be positive or null, got ", *c.sliding_window);
  if (const auto& s = c.rope_scaling) {
    if (!(s->factor > 0.0)) fail(c.model_type, " config: rope_scaling factor must be positive, got ", s->factor);
    if (!(s->low_freq_factor > 0.0) || !(s->high_freq_factor > s->low_freq_factor))
      fail(c.model_type, " config: rope_scaling needs 0 < low_freq_factor < high_freq_factor, got ",
           s->low_freq_factor, " and ", s->high_freq_factor);
    if (s->original_max_position_embeddings <= 0)
      fail(c.model_type, " config: rope_scaling original_max_position_embeddings must be positive");
  }
}

namespace {

// A field that is absent or null is "not given" (Hugging Face writes null
// for defaults such as head_dim or rope_scaling).
const json* field(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

int64_t get_int(const json& j, const std::string& where, const char* key) {
  const json* v = field(j, key);
  if (!v) fail(where, ": missing key \"", key, "\"");
  if (!v->is_number_integer()) fail(where, ": \"", key, "\" must be an integer, got ", v->dump());
  return v->get<int64_t>();
}

int64_t get_int(const json& j, const std::string& where, const char* key, int64_t fallback) {
  return field(j, key) ? get_int(j, where, key) : fallback;
}

double get_number(const json& j, const std::string& where, const char* key, double fallback) {
  const json* v = field(j, key);
  if (!v) return fallback;
  if (!v->is_number()) fail(where, ": \"", key, "\" must be a number, got ", v->dump());
  return v->get<double>();
}

bool get_bool(const json& j, const std::string& where, const char* key, bool fallback) {
  const json* v = field(j, key);
  if (!v) return fallback;
  if (!v->is_boolean()) fail(where, ": \"", key, "\" must be true or false, got ", v->dump());
  return v->get<bool>();
}

// rope_scaling (4.x) or rope_parameters (5.x): "default" or "llama3"; any
// other type changes the frequencies in a way this model does not compute.
void read_rope(const json& r, const std::string& where, const char* key, LlamaConfig& c) {
  if (!r.is_object()) fail(where, ": \"", key, "\" must be an object or null, got ", r.dump());
  const json* type = field(r, "rope_type");
  if (!type) type = field(r, "type");  // the 4.3x spelling
  std::string kind = "default";
  if (type) {
    if (!type->is_string()) fail(where, ": ", key, ".rope_type must be a string, got ", type->dump());
    kind = type->get<std::string>();
  }
  const std::string sub = where + ": " + key;
  if (r.contains("rope_theta")) c.rope_theta = get_number(r, sub, "rope_theta", c.rope_theta);
  if (const json* p = field(r, "partial_rotary_factor"); p && !(p->is_number() && p->get<double>() == 1.0))
    fail(where, ": ", key, ".partial_rotary_factor ", p->dump(), " is not supported (only 1.0: every dimension rotates)");
  if (kind == "default") return;
  if (kind != "llama3")
    fail(where, ": ", key, " of type \"", kind, "\" is not supported (supported: \"default\", \"llama3\")");
  Llama3RopeScaling s;
  s.factor = get_number(r, sub, "factor", -1.0);
  if (!field(r, "factor")) fail(sub, ": missing key \"factor\"");
  if (!field(r, "low_freq_factor")) fail(sub, ": missing key \"low_freq_factor\"");
  if (!field(r, "high_freq_factor")) fail(sub, ": missing key \"high_freq_factor\"");
  s.low_freq_factor = get_number(r, sub, "low_freq_factor", 1.0);
  s.high_freq_factor = get_number(r, sub, "high_freq_factor", 4.0);
  s.original_max_position_embeddings = get_int(r, sub, "original_max_position_embeddings");
  c.rope_scaling = s;
}

}  // namespace

LlamaConfig llama_config_from_json_text(const std::string& text, const std::string& where) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) fail(where, ": not a JSON object");
  LlamaConfig c;
  const json* type = field(j, "model_type");
  c.model_type = type && type->is_string() ? type->get<std::string>() : "llama";
  if (c.model_type != "llama" && c.model_type != "mistral" && c.model_type != "qwen2")
    fail(where, ": model_type is ", type->dump(), "; a Llama-family config has \"llama\", \"mistral\" or \"qwen2\"");
  c.vocab_size = get_int(j, where, "vocab_size");
  c.hidden_size = get_int(j, where, "hidden_size");
  c.intermediate_size = get_int(j, where, "intermediate_size");
  c.num_hidden_layers = get_int(j, where, "num_hidden_layers");
  c.num_attention_heads = get_int(j, where, "num_attention_heads");
  c.num_key_value_heads = get_int(j, where, "num_key_value_heads", c.num_attention_heads);
  c.head_dim = get_int(j, where, "head_dim", 0);
  // transformers' defaults where a field is absent.
  const int64_t default_positions = c.model_type == "llama" ? 2048 : c.model_type == "mistral" ? 131072 : 32768;
  c.max_position_embeddings = get_int(j, where, "max_position_embeddings", default_positions);
  c.rms_norm_eps = get_number(j, where, "rms_norm_eps", 1e-6);
  c.rope_theta = get_number(j, where, "rope_theta", 10000.0);
  c.tie_word_embeddings = get_bool(j, where, "tie_word_embeddings", false);
  c.initializer_range = get_number(j, where, "initializer_range", 0.02);
  if (const json* act = field(j, "hidden_act"); act && *act != "silu")
    fail(where, ": hidden_act is ", act->dump(), ", only \"silu\" (SiLU-gated MLP) is supported");
  if (get_number(j, where, "attention_dropout", 0.0) != 0.0)
    fail(where, ": attention_dropout ", j["attention_dropout"].dump(), " is not supported (only 0.0)");
  if (const json* p = field(j, "partial_rotary_factor"); p && !(p->is_number() && p->get<double>() == 1.0))
    fail(where, ": partial_rotary_factor ", p->dump(), " is not supported (only 1.0: every dimension rotates)");
  if (c.model_type == "qwen2") {
    c.qkv_bias = true;  // Qwen2's q/k/v projections always have biases, o_proj none
  } else if (c.model_type == "llama") {
    c.qkv_bias = c.o_bias = get_bool(j, where, "attention_bias", false);
    c.mlp_bias = get_bool(j, where, "mlp_bias", false);
  }
  // 5.x's rope_parameters replaces 4.x's rope_theta and rope_scaling.
  if (const json* r = field(j, "rope_parameters")) read_rope(*r, where, "rope_parameters", c);
  else if (const json* r = field(j, "rope_scaling")) read_rope(*r, where, "rope_scaling", c);
  if (c.model_type == "mistral") {
    // MistralConfig's default window is 4096; null turns it off.
    c.sliding_window = j.contains("sliding_window") ? (j["sliding_window"].is_null() ? std::nullopt
                                                           : std::optional<int64_t>(get_int(j, where, "sliding_window")))
                                                    : std::optional<int64_t>(4096);
  } else if (c.model_type == "qwen2") {
    bool sliding = get_bool(j, where, "use_sliding_window", false);
    if (const json* types = field(j, "layer_types"); types && types->is_array())
      for (const json& t : *types) sliding = sliding || t == "sliding_attention";
    if (sliding) c.sliding_window = get_int(j, where, "sliding_window", 4096);
  }
  try {
    validate(c);
  } catch (const Error& e) {
    fail(where, ": ", e.what());
  }
  return c;
}

LlamaConfig llama_config_from_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open config file");
  std::stringstream text;
  text << in.rdbuf();
  return llama_config_from_json_text(text.str(), path);
}

std::string llama_config_json(const LlamaConfig& c) {
  const char* arch = c.model_type == "mistral" ? "MistralForCausalLM"
                     : c.model_type == "qwen2" ? "Qwen2ForCausalLM"
                                               : "LlamaForCausalLM";
  nlohmann::ordered_json j = {{"architectures", {arch}},
                              {"model_type", c.model_type},
                              {"hidden_act", "silu"},
                              {"vocab_size", c.vocab_size},
                              {"hidden_size", c.hidden_size},
                              {"intermediate_size", c.intermediate_size},
                              {"num_hidden_layers", c.num_hidden_layers},
                              {"num_attention_heads", c.num_attention_heads},
                              {"num_key_value_heads", c.num_key_value_heads},
                              {"head_dim", c.head_size()},
                              {"max_position_embeddings", c.max_position_embeddings},
                              {"rms_norm_eps", c.rms_norm_eps},
                              {"rope_theta", c.rope_theta},
                              {"rope_scaling", nullptr},
                              {"tie_word_embeddings", c.tie_word_embeddings},
                              {"attention_dropout", 0.0},
                              {"initializer_range", c.initializer_range},
                              {"torch_dtype", "float32"}};
  if (const auto& s = c.rope_scaling)
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", s->factor},
                         {"low_freq_factor", s->low_freq_factor},
                         {"high_freq_factor", s->high_freq_factor},
                         {"original_max_position_embeddings", s->original_max_position_embeddings}};
  if (c.model_type == "llama") {
    j["attention_bias"] = c.qkv_bias;
    j["mlp_bias"] = c.mlp_bias;
  } else if (c.model_type == "mistral") {
    j["sliding_window"] = c.sliding_window ? json(*c.sliding_window) : json(nullptr);
  } else {
    j["use_sliding_window"] = c.sliding_window.has_value();
    j["sliding_window"] = c.sliding_window ? json(*c.sliding_window) : json(nullptr);
  }
  return j.dump(2) + "\n";
}

std::vector<float> rope_inv_freq(const LlamaConfig& c) {
  // float32 throughout, operation for operation as transformers computes it
  // (a Python scalar meets a float32 tensor as a float32).
  const int64_t d = c.head_size();
  const auto base = static_cast<float>(c.rope_theta);
  std::vector<float> inv(static_cast<size_t>(d / 2));
  for (int64_t i = 0; i < d / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(d);
    inv[static_cast<size_t>(i)] = 1.0f / std::pow(base, exponent);
  }
  if (!c.rope_scaling) return inv;
  const Llama3RopeScaling& s = *c.rope_scaling;
  const double old_context = static_cast<double>(s.original_max_position_embeddings);
  const auto low_wavelen = static_cast<float>(old_context / s.low_freq_factor);
  const auto high_wavelen = static_cast<float>(old_context / s.high_freq_factor);
  const auto factor = static_cast<float>(s.factor);
  for (float& f : inv) {
    // 2*pi / inv_freq is reciprocal(inv_freq) * 2*pi for a tensor.
    const float wavelen = (1.0f / f) * static_cast<float>(2.0 * M_PI);
    const float scaled = wavelen > low_wavelen ? f / factor : f;
    const float smooth = ((1.0f / wavelen) * static_cast<float>(old_context) - static_cast<float>(s.low_freq_factor)) /
                         static_cast<float>(s.high_freq_factor - s.low_freq_factor);
    const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    f = medium ? smoothed : scaled;
  }
  return inv;
}

}  // namespace fsdpc
