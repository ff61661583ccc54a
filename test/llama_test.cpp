// The Llama family in the frontend: config.json as transformers 4.x and 5.x
// write it (and what is refused, by name), the presets' parameter counts
// against Hugging Face's published ones, the parameter names and FSDP units,
// rotary embeddings against a direct implementation of Hugging Face's
// formula. Sharded against unsharded: sharding_parity_test (every strategy).
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "executors/reference/reference.h"
#include "frontend/models/llama/llama.h"
#include "frontend/models/registry.h"
#include "ir/error.h"
#include "passes/grad.h"
#include "passes/pipeline.h"
#include "passes/wrap.h"

using namespace fsdpc;
using Catch::Contains;
using reference::Value;

namespace {

// transformers 4.x: top-level rope_theta and rope_scaling (Llama 3.2 1B's file).
const char* kLlama32Json = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})";

// transformers 5.x: rope_parameters carries the type and theta.
const char* kLlama32Json5 = R"({
  "architectures": ["LlamaForCausalLM"], "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048,
  "intermediate_size": 8192, "max_position_embeddings": 131072, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
  "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0,
                      "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                      "original_max_position_embeddings": 8192},
  "tie_word_embeddings": true, "dtype": "bfloat16", "transformers_version": "5.0.0", "vocab_size": 128256})";

std::string small(const std::string& model_type, const std::string& extra) {
  return R"({"model_type": ")" + model_type + R"(", "vocab_size": 50, "hidden_size": 16,
             "intermediate_size": 24, "num_hidden_layers": 1, "num_attention_heads": 4,
             "num_key_value_heads": 2, "max_position_embeddings": 32)" +
         (extra.empty() ? "" : ", " + extra) + "}";
}

std::set<std::string> param_names(const Model& m) {
  std::set<std::string> out;
  for (const NamedParam& p : m.named_parameters()) out.insert(p.path);
  return out;
}

}  // namespace

TEST_CASE("llama config.json: transformers 4.x and 5.x forms read the same", "[llama][config]") {
  for (const char* text : {kLlama32Json, kLlama32Json5}) {
    const LlamaConfig c = llama_config_from_json_text(text, "config.json");
    CHECK(c.model_type == "llama");
    CHECK(c.vocab_size == 128256);
    CHECK(c.hidden_size == 2048);
    CHECK(c.intermediate_size == 8192);
    CHECK(c.num_hidden_layers == 16);
    CHECK(c.num_attention_heads == 32);
    CHECK(c.num_key_value_heads == 8);
    CHECK(c.head_size() == 64);
    CHECK(c.max_position_embeddings == 131072);
    CHECK(c.rms_norm_eps == 1e-5);
    CHECK(c.rope_theta == 500000.0);
    CHECK(c.tie_word_embeddings);
    REQUIRE(c.rope_scaling);
    CHECK(c.rope_scaling->factor == 32.0);
    CHECK(c.rope_scaling->low_freq_factor == 1.0);
    CHECK(c.rope_scaling->high_freq_factor == 4.0);
    CHECK(c.rope_scaling->original_max_position_embeddings == 8192);
    CHECK(!c.qkv_bias);
    CHECK(!c.sliding_window);
  }
  // What we write reads back to the same config.
  const LlamaConfig c = llama_config_from_json_text(kLlama32Json, "a");
  const LlamaConfig back = llama_config_from_json_text(llama_config_json(c), "b");
  CHECK(llama_config_json(back) == llama_config_json(c));
  // head_dim absent or null: hidden_size / heads; num_key_value_heads absent: MHA.
  const LlamaConfig d = llama_config_from_json_text(
      R"({"model_type": "llama", "vocab_size": 10, "hidden_size": 12, "intermediate_size": 8,
          "num_hidden_layers": 1, "num_attention_heads": 3, "head_dim": null, "rope_scaling": null})", "x");
  CHECK(d.head_size() == 4);
  CHECK(d.num_key_value_heads == 3);
  CHECK(!d.rope_scaling);
  CHECK(d.rope_theta == 10000.0);
}

TEST_CASE("llama config.json: qwen2 has q/k/v biases, llama's attention_bias and mlp_bias add theirs",
          "[llama][config]") {
  Llama qwen("qwen2", llama_config_from_json_text(small("qwen2", ""), "q"));
  std::set<std::string> names = param_names(qwen);
  for (const char* p : {"q", "k", "v"}) CHECK(names.count(std::string("model.layers.0.self_attn.") + p + "_proj.bias"));
  CHECK(!names.count("model.layers.0.self_attn.o_proj.bias"));
  CHECK(!names.count("model.layers.0.mlp.up_proj.bias"));

  Llama biased("llama", llama_config_from_json_text(small("llama", R"("attention_bias": true, "mlp_bias": true)"), "l"));
  names = param_names(biased);
  for (const char* p : {"q", "k", "v", "o"}) CHECK(names.count(std::string("model.layers.0.self_attn.") + p + "_proj.bias"));
  for (const char* p : {"gate", "up", "down"}) CHECK(names.count(std::string("model.layers.0.mlp.") + p + "_proj.bias"));
  CHECK(capture(biased, CaptureOptions{1, 8, {}}).args.size() == 2 + names.size());
}

TEST_CASE("llama config.json: unsupported math is refused by name", "[llama][config]") {
  auto refused = [](const std::string& text) {
    try {
      llama_config_from_json_text(text, "cfg.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK_THAT(refused(small("llama", R"("rope_scaling": {"type": "linear", "factor": 2.0})")),
             Contains("cfg.json") && Contains("rope_scaling of type \"linear\" is not supported"));
  CHECK_THAT(refused(small("llama", R"("rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0})")),
             Contains("rope_parameters of type \"yarn\""));
  CHECK_THAT(refused(small("llama", R"("rope_scaling": {"rope_type": "llama3", "factor": 8.0})")),
             Contains("missing key \"low_freq_factor\""));
  CHECK_THAT(refused(small("llama", R"("hidden_act": "gelu")")), Contains("hidden_act is \"gelu\""));
  CHECK_THAT(refused(small("llama", R"("attention_dropout": 0.1)")), Contains("attention_dropout"));
  CHECK_THAT(refused(small("llama", R"("partial_rotary_factor": 0.5)")), Contains("partial_rotary_factor"));
  CHECK_THAT(refused(small("llama", R"("num_key_value_heads": 3)")), Contains("not a multiple of num_key_value_heads 3"));
  CHECK_THAT(refused(small("gemma", "")), Contains("model_type is \"gemma\""));
  CHECK_THAT(refused(R"({"model_type": "llama", "hidden_size": 8})"), Contains("missing key \"vocab_size\""));
  CHECK_THAT(refused(small("llama", R"("hidden_size": "big")")), Contains("\"hidden_size\" must be an integer"));
  // Unknown fields are ignored.
  CHECK(refused(small("llama", R"("some_future_field": [1, 2], "use_cache": false)")) == "accepted");
}

TEST_CASE("mistral's sliding window is refused when shorter than the sequence", "[llama][config]") {
  Llama windowed("mistral", llama_config_from_json_text(small("mistral", R"("sliding_window": 16)"), "m"));
  CHECK_THROWS_WITH(capture(windowed, CaptureOptions{1, 32, {}}),
                    Contains("sliding_window 16 is smaller than the sequence length 32"));
  CHECK_NOTHROW(capture(windowed, CaptureOptions{1, 16, {}}));
  Llama unwindowed("mistral", llama_config_from_json_text(small("mistral", R"("sliding_window": null)"), "m"));
  CHECK_NOTHROW(capture(unwindowed, CaptureOptions{1, 32, {}}));
  // MistralConfig's default window is 4096; Qwen2's is off unless use_sliding_window.
  CHECK(llama_config_from_json_text(small("mistral", ""), "m").sliding_window == 4096);
  CHECK(!llama_config_from_json_text(small("qwen2", R"("sliding_window": 8, "use_sliding_window": false)"), "q").sliding_window);
  CHECK(llama_config_from_json_text(small("qwen2", R"("sliding_window": 8, "use_sliding_window": true)"), "q").sliding_window == 8);
}

TEST_CASE("llama presets count Hugging Face's parameters", "[llama][model]") {
  // sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(repo).parameters()),
  // a tied lm_head counted once, as the model cards publish them.
  const std::vector<std::pair<std::string, int64_t>> hf = {{"smollm-135m", 134'515'008},
                                                          {"tinyllama-1.1b", 1'100'048'384},
                                                          {"llama3.2-1b", 1'235'814'400},
                                                          {"llama3-8b", 8'030'261'248}};
  for (const auto& [name, expected] : hf) {
    INFO(name);
    auto model = make_model(name);
    const Trace t = capture(*model, CaptureOptions{1, 8, {}});
    int64_t from_trace = 0;
    for (const Proxy& a : t.args)
      if (a.is_param()) from_trace += numel(a.type.shape);
    CHECK(from_trace == expected);
  }
}

TEST_CASE("llama-tiny has Hugging Face's names, and each decoder layer is one FSDP unit", "[llama][model]") {
  auto model = make_model("llama-tiny");
  std::vector<std::string> names;
  for (const NamedParam& p : model->named_parameters()) names.push_back(p.path);
  std::vector<std::string> want = {"model.embed_tokens.weight"};
  for (int i = 0; i < 2; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    for (const char* p : {"input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                          "self_attn.v_proj.weight", "self_attn.o_proj.weight", "post_attention_layernorm.weight",
                          "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"})
      want.push_back(l + p);
  }
  want.push_back("model.norm.weight");
  want.push_back("lm_head.weight");
  CHECK(names == want);  // state_dict order too
  const Trace t = capture(*model, CaptureOptions{2, 16, {}});
  std::map<std::string, Shape> shapes;
  for (const Proxy& a : t.args)
    if (a.is_param()) shapes[a.param_path] = a.type.shape;
  CHECK(shapes["model.layers.0.self_attn.q_proj.weight"] == Shape{48, 54});  // 6 heads of 8
  CHECK(shapes["model.layers.0.self_attn.k_proj.weight"] == Shape{16, 54});  // 2 k/v heads
  CHECK(shapes["model.layers.0.self_attn.o_proj.weight"] == Shape{54, 48});
  CHECK(shapes["model.layers.1.mlp.down_proj.weight"] == Shape{54, 94});
  CHECK(shapes["lm_head.weight"] == Shape{256, 54});

  const std::vector<Unit> units = wrap_units(t, "block");
  REQUIRE(units.size() == 3);
  CHECK(units[0].name == "root");
  CHECK(units[0].params.size() == 3);  // embed_tokens, norm, lm_head
  CHECK(units[1].name == "model.layers.0");
  CHECK(units[1].params.size() == 9);
  CHECK(units[2].name == "model.layers.1");

  // Tied: no lm_head parameter; the logits use the embedding.
  LlamaConfig tied = dynamic_cast<const Llama&>(*model).config();
  tied.tie_word_embeddings = true;
  Llama tied_model("tied", tied);
  CHECK(!param_names(tied_model).count("lm_head.weight"));
  CHECK(tied_model.tied_head() == "model.embed_tokens.weight");
}

namespace {

// Hugging Face's _compute_default_rope_parameters and
// _compute_llama3_parameters, written out directly: torch computes in
// float32, a Python number meeting a float32 tensor as float32, and
// `number / tensor` as reciprocal(tensor) * number.
std::vector<float> hf_inv_freq(double theta, int64_t dim, const Llama3RopeScaling* s) {
  std::vector<float> inv;
  for (int64_t i = 0; i < dim; i += 2) {
    float e = static_cast<float>(i) / static_cast<float>(dim);
    float base_pow = std::pow(static_cast<float>(theta), e);
    inv.push_back(1.0f / base_pow);
  }
  if (!s) return inv;
  const float low_wavelen = static_cast<float>(s->original_max_position_embeddings / s->low_freq_factor);
  const float high_wavelen = static_cast<float>(s->original_max_position_embeddings / s->high_freq_factor);
  std::vector<float> out;
  for (float f : inv) {
    float wavelen = (1.0f / f) * static_cast<float>(2 * M_PI);
    float llama = wavelen > low_wavelen ? f / static_cast<float>(s->factor) : f;
    float smooth_factor =
        ((1.0f / wavelen) * static_cast<float>(s->original_max_position_embeddings) - static_cast<float>(s->low_freq_factor)) /
        static_cast<float>(s->high_freq_factor - s->low_freq_factor);
    float smoothed = (1.0f - smooth_factor) * llama / static_cast<float>(s->factor) + smooth_factor * llama;
    bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    out.push_back(medium ? smoothed : llama);
  }
  return out;
}

// apply_rotary_pos_emb for x [H, T, D] at positions 0..T-1: q*cos + rotate_half(q)*sin.
std::vector<double> hf_rope(const std::vector<double>& x, int64_t H, int64_t T, int64_t D,
                            const std::vector<float>& inv) {
  std::vector<double> out(x.size());
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d = 0; d < D; ++d) {
        const double angle = static_cast<double>(t) * static_cast<double>(inv[static_cast<size_t>(d % (D / 2))]);
        const size_t row = static_cast<size_t>((h * T + t) * D);
        const double rotated = d < D / 2 ? -x[row + static_cast<size_t>(d + D / 2)] : x[row + static_cast<size_t>(d - D / 2)];
        out[row + static_cast<size_t>(d)] = x[row + static_cast<size_t>(d)] * std::cos(angle) + rotated * std::sin(angle);
      }
  return out;
}

}  // namespace

TEST_CASE("rotary embeddings equal Hugging Face's formula (theta, positions, llama3 scaling)", "[llama][rope]") {
  struct Rope {
    double theta;
    int64_t dim, T;
    std::optional<Llama3RopeScaling> scaling;
  };
  const std::vector<Rope> cases = {{10000.0, 8, 5, std::nullopt},
                                   {500000.0, 64, 300, std::nullopt},
                                   {500000.0, 64, 300, Llama3RopeScaling{32.0, 1.0, 4.0, 8192}},
                                   {1e6, 16, 40, Llama3RopeScaling{8.0, 1.0, 4.0, 64}}};
  for (const Rope& r : cases) {
    INFO("theta " << r.theta << " dim " << r.dim << " T " << r.T << (r.scaling ? " llama3" : ""));
    LlamaConfig c;
    c.rope_theta = r.theta;
    c.head_dim = r.dim;
    c.rope_scaling = r.scaling;
    const std::vector<float> inv = hf_inv_freq(r.theta, r.dim, r.scaling ? &*r.scaling : nullptr);
    CHECK(rope_inv_freq(c) == inv);  // bit for bit
    // The float32 values are within float32 rounding of the exact formula.
    for (size_t i = 0; i < inv.size() && !r.scaling; ++i)
      CHECK(inv[i] == Approx(std::pow(r.theta, -2.0 * static_cast<double>(i) / static_cast<double>(r.dim))).epsilon(1e-6));

    const int64_t H = 2;
    Tracer tracer("rope");
    Tensor x = tracer.input("x", {H, r.T, r.dim});
    auto [cos, sin] = rope_tables(tracer, c, r.T);
    Trace trace = tracer.finish({apply_rope(x, cos, sin)});
    std::mt19937 rng(7);
    std::normal_distribution<double> normal;
    Value xv{trace.args[0].type, std::vector<double>(static_cast<size_t>(H * r.T * r.dim))};
    for (double& v : xv.data) v = normal(rng);
    const std::vector<double> got = reference::run(trace, {xv}).at(0).data;
    const std::vector<double> want = hf_rope(xv.data, H, r.T, r.dim, inv);
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
    CHECK(worst < 1e-12);
  }
  // llama3 scaling slows the long wavelengths by the factor, keeps the short ones.
  LlamaConfig plain, scaled;
  plain.head_dim = scaled.head_dim = 64;
  plain.rope_theta = scaled.rope_theta = 500000.0;
  scaled.rope_scaling = Llama3RopeScaling{32.0, 1.0, 4.0, 8192};
  const std::vector<float> a = rope_inv_freq(plain), b = rope_inv_freq(scaled);
  CHECK(b.front() == a.front());
  CHECK(b.back() == Approx(a.back() / 32.0f).epsilon(1e-6));
}
