// `fsdpc generate` as users run it: a byte-level gpt2-tiny trained for a few
// seconds on one repeated sentence continues it; greedy and seeded sampling
// are reproducible; bad flags and prompts exit 2. Plus sample_token itself.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "frontend/generate.h"
#include "frontend/models/registry.h"
#include "runtime/io/safetensors.h"
#include "test/run_cli.h"
#include "test/scratch.h"

namespace fs = std::filesystem;
using Catch::Contains;

namespace {

using fsdpc::testing::Run;
using fsdpc::testing::run_fsdpc;
using fsdpc::testing::scratch;

const std::string kSentence = "the quick brown fox jumps over the lazy dog. ";

// Trained once per test process: ~1 s on one rank.
const fs::path& trained_checkpoint() {
  static const fs::path ck = [] {
    fs::path data = scratch("sentence.txt"), dir = scratch("ck");
    std::ofstream(data) << [] {
      std::string s;
      for (int i = 0; i < 400; ++i) s += kSentence;
      return s;
    }();
    Run r = run_fsdpc("train --model gpt2-tiny --steps 60 --seq 32 --batch 8 --lr 3e-3 --data '" + data.string() +
                      "' --save '" + dir.string() + "'");
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    return dir;
  }();
  return ck;
}

Run generate(const std::string& flags) {
  return run_fsdpc("generate --init '" + trained_checkpoint().string() + "' " + flags);
}

}  // namespace

TEST_CASE("sample_token: temperature 0 is argmax, top-k bounds the support", "[generate]") {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  for (double u : {0.0, 0.5, 0.999}) CHECK(fsdpc::sample_token(logits, {0.0, 0}, u) == 1);  // first of the tied maxima
  std::set<int64_t> seen;
  for (int i = 0; i < 100; ++i) seen.insert(fsdpc::sample_token(logits, {1.0, 2}, i / 100.0));
  CHECK(seen == std::set<int64_t>{1, 3});
  seen.clear();
  for (int i = 0; i < 1000; ++i) seen.insert(fsdpc::sample_token(logits, {1.0, 0}, i / 1000.0));
  CHECK(seen.size() == logits.size());
  // The inverse CDF: p(1) = 3/4 for logits {0, log 3}, most likely first.
  const std::vector<float> two = {0.0f, static_cast<float>(std::log(3.0))};
  CHECK(fsdpc::sample_token(two, {1.0, 0}, 0.74) == 1);
  CHECK(fsdpc::sample_token(two, {1.0, 0}, 0.76) == 0);
  CHECK(fsdpc::sample_token(two, {1.0, 5}, 0.76) == 0);  // k past the vocabulary is all of it
}

TEST_CASE("generate continues a trained sentence, reproducibly", "[generate][cli]") {
  const std::string prompt = "the quick";
  Run greedy = generate("--prompt '" + prompt + "' --max-new-tokens 40 --temperature 0");
  INFO(greedy.out << greedy.err);
  REQUIRE(greedy.code == 0);
  REQUIRE(greedy.out.rfind(prompt, 0) == 0);
  const std::string added = greedy.out.substr(prompt.size(), greedy.out.size() - prompt.size() - 1);
  CHECK(added.size() == 40);
  // Plausible: only the sentence's characters (an untrained model emits any
  // of 256 bytes), and at least one of its words.
  for (char c : added) CHECK(kSentence.find(c) != std::string::npos);
  bool has_word = false;
  for (const char* w : {"brown", "fox", "jumps", "over", "lazy", "dog"})
    has_word = has_word || added.find(w) != std::string::npos;
  CHECK(has_word);
  CHECK(generate("--prompt '" + prompt + "' --max-new-tokens 40 --temperature 0").out == greedy.out);

  const std::string sampled = "--prompt '" + prompt + "' --max-new-tokens 40 --temperature 1 --seed ";
  Run a = generate(sampled + "1"), b = generate(sampled + "1");
  Run c = generate(sampled + "2"), d = generate(sampled + "3");
  REQUIRE(a.code == 0);
  CHECK(a.out == b.out);
  CHECK((c.out != a.out || d.out != a.out));  // two other seeds both matching 40 draws is vanishingly unlikely

  // A prompt past the context (64) keeps its last n_positions tokens.
  Run long_prompt = generate("--prompt '" + kSentence + kSentence + "' --max-new-tokens 5 --top-k 3");
  INFO(long_prompt.err);
  CHECK(long_prompt.code == 0);
  CHECK(long_prompt.out.size() == 2 * kSentence.size() + 5 + 1);
}

TEST_CASE("generate rejects bad flags, checkpoints and prompts with exit code 2", "[generate][cli]") {
  Run r = run_fsdpc("generate --prompt 'x' --max-new-tokens 1");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("--init"));
  r = generate("--prompt 'x' --max-new-tokens 1 --top-k 0");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("--top-k"));
  r = generate("--prompt 'x' --max-new-tokens 1 --temperature -1");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("--temperature"));
  r = generate("--prompt '' --max-new-tokens 1");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("--prompt is empty"));
  r = run_fsdpc("generate --init '" + scratch("nowhere").string() + "' --prompt x --max-new-tokens 1");
  CHECK(r.code == 2);

  // A vocab-300 model (zero weights suffice): prompts are ids below 300.
  const fs::path config = scratch("v300.json"), weights = scratch("v300.safetensors");
  std::ofstream(config) << R"({"model_type": "gpt2", "n_layer": 1, "n_head": 2, "n_embd": 16, "vocab_size": 300,
                              "n_positions": 16})";
  auto model = fsdpc::make_model_from_config(config.string());
  std::vector<std::vector<float>> zeros;
  std::vector<fsdpc::SafetensorsTensor> tensors;
  for (const auto& p : model->named_parameters()) {
    zeros.emplace_back(static_cast<size_t>(fsdpc::numel(p.spec->shape)), 0.0f);
    tensors.push_back({p.path, p.spec->shape, zeros.back().data()});
  }
  fsdpc::write_safetensors(weights.string(), tensors);
  const std::string v300 = "generate --init '" + weights.string() + "' --config '" + config.string() + "' ";
  r = run_fsdpc(v300 + "--prompt '1 2 299' --max-new-tokens 3 --temperature 0");
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.out == "1 2 299 0 0 0\n");  // zero weights: all logits tie, argmax takes id 0
  r = run_fsdpc(v300 + "--prompt '1 300' --max-new-tokens 1");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("token id 300 is outside the vocabulary [0, 300)"));
  r = run_fsdpc(v300 + "--prompt '1 two' --max-new-tokens 1");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("'two' is not a token id"));
  // Weights that do not fit the config name the tensor.
  r = run_fsdpc("generate --init '" + trained_checkpoint().string() + "' --config '" + config.string() +
                "' --prompt 1 --max-new-tokens 1");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("wte.weight has shape"));
}
