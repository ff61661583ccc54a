// fsdpc generate with a tokenizer: the prompt is text encoded by the
// tokenizer in the --init folder (or --tokenizer), and what is sampled
// prints as decoded text. The model is a GPT-2 whose weights make one token
// the argmax after any context (the final layer norm's bias picks a
// dimension that only that token's embedding has), so the output is known.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "frontend/models/registry.h"
#include "runtime/io/safetensors.h"
#include "test/run_cli.h"
#include "test/scratch.h"
#include "test/tokenizer_fixtures.h"
#include "tokenizer/tokenizer.h"

using namespace fsdpc;
using namespace fsdpc::testing;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kEmbd = 16;

// A GPT-2 folder (config.json, model.safetensors, the fixture's
// tokenizer.json) of vocabulary `vocab` that always predicts `token`.
fs::path write_folder(const std::string& name, int64_t vocab, TokenId token) {
  const fs::path dir = scratch(name);
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"model_type": "gpt2", "n_layer": 1, "n_head": 2, "n_embd": 16, "vocab_size": )"
                                     << vocab << R"(, "n_positions": 32})";
  write_scratch(name + "/tokenizer.json", kGpt2SplitJson);
  auto model = make_model_from_config((dir / "config.json").string());
  std::vector<std::vector<float>> values;
  std::vector<SafetensorsTensor> tensors;
  for (const auto& p : model->named_parameters()) {
    values.emplace_back(static_cast<size_t>(numel(p.spec->shape)), 0.0f);
    if (p.path == "ln_f.bias") values.back()[kEmbd - 1] = 1.0f;
    if (p.path == "wte.weight") values.back()[token * kEmbd + kEmbd - 1] = 1.0f;
    tensors.push_back({p.path, p.spec->shape, values.back().data()});
  }
  write_safetensors((dir / "model.safetensors").string(), tensors);
  return dir;
}

}  // namespace

TEST_CASE("generate encodes the prompt and prints the sampled tokens as text", "[generate][cli]") {
  const fs::path probe = scratch("probe.json");
  write_scratch("probe.json", kGpt2SplitJson);
  auto gpt2 = load_tokenizer(probe.string());
  const TokenId the = gpt2->encode(" the").front();
  const std::string word = gpt2->decode(std::vector<TokenId>{the});
  const fs::path dir = write_folder("gpt2-text", 400, the);
  Run r = run_fsdpc("generate --init '" + dir.string() + "' --prompt 'Hello, café 日本' --max-new-tokens 3 --temperature 0");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == "Hello, café 日本" + word + word + word + "\n");
  // --tokenizer names one explicitly; a file beside the weights works too.
  r = run_fsdpc("generate --init '" + (dir / "model.safetensors").string() + "' --tokenizer '" + probe.string() +
                "' --prompt 'Hi' --max-new-tokens 2 --temperature 0");
  CHECK(r.code == 0);
  CHECK(r.out == "Hi" + word + word + "\n");
}

TEST_CASE("generate refuses a tokenizer larger than the model's vocabulary", "[generate][cli]") {
  const fs::path dir = write_folder("gpt2-small-vocab", 300, 5);
  const Run r = run_fsdpc("generate --init '" + dir.string() + "' --prompt 'Hi' --max-new-tokens 1");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("has 400 ids, more than the model's vocabulary of 300"));
}
