// Model capture: the built-in models have the structure and parameter names
// users expect, and any model assembled from the modules captures, prints,
// parses and verifies — nothing is special-cased for the built-in ones.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "frontend/models/gpt2/gpt2.h"
#include "frontend/layers.h"
#include "frontend/models/registry.h"
#include "ir/error.h"
#include "ir/json.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

using namespace fsdpc;
using Catch::Contains;

namespace {
std::vector<OpId> top_level_ops(const Trace& t) {
  std::vector<OpId> ops;
  for (const BoundSymbol& b : t.bsyms) ops.push_back(b.op);
  return ops;
}

void check_round_trips(const Trace& t) {
  CHECK_NOTHROW(verify(t));
  std::string text = print_trace(t);
  Trace parsed = parse_trace(text, "capture");
  CHECK(parsed == t);
  CHECK(print_trace(parsed) == text);
  CHECK(trace_from_json(trace_to_json(t), "capture") == t);
}

std::string temp_file(const std::string& name, const std::string& content) {
  auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << content;
  return path.string();
}
}  // namespace

TEST_CASE("mlp is the FSDP tutorial model", "[capture]") {
  Trace t = capture(*make_model("mlp"));
  REQUIRE(t.args.size() == 3);
  CHECK(t.args[0].name == "x");
  CHECK(t.args[1].name == "t_0_weight");
  CHECK(t.args[1].param_path == "0.weight");
  CHECK(t.args[2].name == "t_2_weight");
  for (const Proxy& a : t.args) CHECK(a.type.shape == Shape{64, 64});
  CHECK(top_level_ops(t) == std::vector<OpId>{OpId::Linear, OpId::Tanh, OpId::Linear});
  CHECK(t.bsyms[0].inputs.size() == 2);  // bias=False
  check_round_trips(t);
}

TEST_CASE("mlp batch size follows --batch and rejects --seq", "[capture]") {
  CaptureOptions o;
  o.batch = 8;
  Trace t = capture(*make_model("mlp"), o);
  CHECK(t.args[0].type.shape == Shape{8, 64});
  CHECK(t.bsyms.back().output().type.shape == Shape{8, 64});
  o.seq = 4;
  CHECK_THROWS_WITH(capture(*make_model("mlp"), o), Contains("no sequence dimension"));
}

TEST_CASE("gpt2 parameters carry Hugging Face names and shapes", "[capture]") {
  GPT2 model("custom", GPT2Config{3, 4, 32, 100, 16, 1e-5});
  std::vector<std::pair<std::string, Shape>> expected = {{"wte.weight", {100, 32}},
                                                         {"wpe.weight", {16, 32}}};
  for (int i = 0; i < 3; ++i) {
    std::string h = "h." + std::to_string(i) + ".";
    for (auto [name, shape] : std::vector<std::pair<std::string, Shape>>{
             {"ln_1.weight", {32}},         {"ln_1.bias", {32}},
             {"attn.c_attn.weight", {32, 96}}, {"attn.c_attn.bias", {96}},
             {"attn.c_proj.weight", {32, 32}}, {"attn.c_proj.bias", {32}},
             {"ln_2.weight", {32}},         {"ln_2.bias", {32}},
             {"mlp.c_fc.weight", {32, 128}},   {"mlp.c_fc.bias", {128}},
             {"mlp.c_proj.weight", {128, 32}}, {"mlp.c_proj.bias", {32}}})
      expected.emplace_back(h + name, shape);
  }
  expected.push_back({"ln_f.weight", {32}});
  expected.push_back({"ln_f.bias", {32}});

  auto params = model.named_parameters();
  REQUIRE(params.size() == expected.size());
  for (size_t i = 0; i < params.size(); ++i) {
    CHECK(params[i].path == expected[i].first);
    CHECK(params[i].spec->shape == expected[i].second);
  }

  Trace t = capture(model);
  REQUIRE(t.args.size() == 2 + expected.size());
  CHECK(t.args[6].name == "t_h_0_attn_c_attn_weight");
  CHECK(t.args[6].param_path == "h.0.attn.c_attn.weight");
  check_round_trips(t);
}

TEST_CASE("gpt2 ties the output head to wte and ends in a scalar loss", "[capture]") {
  Trace t = capture(*make_model("gpt2-tiny"));
  int wte_uses = 0;
  for (const BoundSymbol& b : t.bsyms)
    for (const Operand& in : b.inputs) wte_uses += in.name == "t_wte_weight";
  CHECK(wte_uses == 2);  // the embedding gather and the head
  CHECK(t.bsyms.back().op == OpId::CrossEntropy);
  CHECK(t.bsyms[t.bsyms.size() - 2].op == OpId::Linear);
  CHECK(t.bsyms.back().output().type.shape.empty());
  CHECK(!t.returns.is_tuple);
  CHECK(t.returns.name == t.bsyms.back().output().name);
  int blocks = 0;
  for (const BoundSymbol& b : t.bsyms) blocks += b.op == OpId::ScaledDotProductAttention;
  CHECK(blocks == 2);
}

TEST_CASE("gpt2 capture options and config errors", "[capture]") {
  CaptureOptions o;
  o.batch = 3;
  o.seq = 10;
  Trace t = capture(*make_model("gpt2-tiny"), o);
  CHECK(t.args[0].type.shape == Shape{3, 10});
  CHECK(t.args[0].type.dtype == DType::i64);
  o.seq = 65;
  CHECK_THROWS_WITH(capture(*make_model("gpt2-tiny"), o), Contains("outside [1, 64]"));
  CHECK_THROWS_WITH(GPT2("bad", GPT2Config{2, 3, 64, 256, 64, 1e-5}), Contains("not divisible by n_head 3"));
  CHECK_THROWS_WITH(GPT2("bad", GPT2Config{0, 2, 64, 256, 64, 1e-5}), Contains("n_layer must be positive"));
  CHECK_THROWS_WITH(make_model("gpt3"), Contains("unknown model 'gpt3'") && Contains("gpt2-tiny"));
}

TEST_CASE("config.json builds a GPT-2 and bad configs name the problem", "[capture]") {
  std::string good = temp_file("fsdpc-cfg-good.json",
                               R"({"model_type": "gpt2", "n_layer": 1, "n_head": 2, "n_embd": 16,
                                   "vocab_size": 50, "n_positions": 8, "layer_norm_epsilon": 1e-6,
                                   "activation_function": "gelu_new"})");
  Trace t = capture(*make_model_from_config(good));
  CHECK(t.args[0].type.shape == Shape{2, 8});
  CHECK(t.args[2].type.shape == Shape{50, 16});
  bool saw_eps = false;
  for (const BoundSymbol& b : t.bsyms)
    if (b.op == OpId::LayerNorm) saw_eps = b.attrs.get_double("eps") == 1e-6;
  CHECK(saw_eps);

  std::string missing = temp_file("fsdpc-cfg-missing.json", R"({"n_layer": 1, "n_head": 2})");
  CHECK_THROWS_WITH(make_model_from_config(missing), Contains("missing key \"n_embd\""));
  std::string wrong = temp_file("fsdpc-cfg-wrong.json", R"({"model_type": "bert"})");
  CHECK_THROWS_WITH(make_model_from_config(wrong), Contains("model_type is \"bert\"") && Contains("\"gpt2\""));
  std::string garbage = temp_file("fsdpc-cfg-garbage.json", "{not json");
  CHECK_THROWS_WITH(make_model_from_config(garbage), Contains("not a JSON object"));
  CHECK_THROWS_WITH(make_model_from_config("/nonexistent/config.json"), Contains("cannot open"));
}

TEST_CASE("a model assembled from the modules captures and round-trips", "[capture]") {
  auto seq = std::make_unique<Sequential>();
  seq->add(std::make_unique<Linear>(12, 24, /*bias=*/true));
  seq->add(std::make_unique<ReLU>());
  seq->add(std::make_unique<LayerNorm>(24));
  seq->add(std::make_unique<GELU>());
  auto inner = std::make_unique<Sequential>();
  inner->add(std::make_unique<Linear>(24, 6, /*bias=*/false));
  inner->add(std::make_unique<Tanh>());
  seq->add(std::move(inner));
  LayerModel model("custom", std::move(seq), Shape{5, 12}, 3);

  Trace t = capture(model);
  std::vector<std::string> names;
  for (const Proxy& a : t.args) names.push_back(a.param_path);
  CHECK(names == std::vector<std::string>{"", "0.weight", "0.bias", "2.weight", "2.bias", "4.0.weight"});
  CHECK(t.args[0].type.shape == Shape{3, 5, 12});
  CHECK(t.bsyms.back().output().type.shape == Shape{3, 5, 6});
  check_round_trips(t);
}

TEST_CASE("ops are shape-checked when recorded", "[capture]") {
  Tracer tr;
  Tensor x = tr.input("x", {4, 8});
  Tensor w = tr.param("w", {3, 5});
  CHECK_THROWS_WITH(linear(x, w), Contains("linear"));
  CHECK_THROWS_WITH(x + tr.input("y", {4, 3}), Contains("do not broadcast"));
  CHECK_THROWS_WITH(reshape(x, {5, -1}), Contains("cannot infer"));
  CHECK_THROWS_WITH(sum(x, {2}), Contains("out of range"));
  Tensor ok = x + tr.input("row", {8});  // broadcasts like numpy
  CHECK(ok.shape() == Shape{4, 8});
  CHECK(mean(x, {-1}, /*keepdim=*/true).shape() == Shape{4, 1});
}
