// SentencePiece tokenizer.model files through libsentencepiece: the ids
// Python's sentencepiece gives for the test texts (a checked-in tiny model,
// test/tokenizers/README.md), decode(encode(x)) == x for random UTF-8, a
// model trained here by the library's trainer, BOS and EOS, a folder's
// tokenizer.model taken before its tokenizer.json, and files that are not
// SentencePiece models refused.
#include <catch2/catch.hpp>

#include <filesystem>
#include <random>
#include <sentencepiece_trainer.h>

#include "ir/error.h"
#include "test/scratch.h"
#include "test/tokenizer_fixtures.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

using namespace fsdpc;
using namespace fsdpc::testing;
using Catch::Matchers::Contains;

namespace {

const std::string kTinyModel = std::string(FSDPC_SOURCE_DIR) + "/test/tokenizers/sp_tiny.model";

class Lines : public sentencepiece::SentenceIterator {
 public:
  explicit Lines(std::vector<std::string> lines) : lines_(std::move(lines)) {}
  bool done() const override { return at_ >= lines_.size(); }
  void Next() override { ++at_; }
  const std::string& value() const override { return lines_[at_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  std::vector<std::string> lines_;
  size_t at_ = 0;
};

// A unigram model trained here, as Llama 2's was made (byte fallback, no
// normalization), written to `path`.
void train_model(const std::string& path) {
  std::vector<std::string> lines;
  for (int repeat = 0; repeat < 30; ++repeat)
    for (const Case& c : kCases) lines.emplace_back(c.text);
  Lines input(lines);
  std::string serialized;
  const auto status = sentencepiece::SentencePieceTrainer::Train(
      {{"model_type", "unigram"}, {"vocab_size", "500"}, {"byte_fallback", "true"},
       {"normalization_rule_name", "identity"}, {"remove_extra_whitespaces", "false"}, {"num_threads", "1"},
       {"minloglevel", "2"}, {"hard_vocab_limit", "false"}},
      &input, &serialized);
  INFO(status.ToString());
  REQUIRE(status.ok());
  write_scratch(std::filesystem::path(path).filename().string(), serialized);
}

std::string random_text(std::mt19937& rng, size_t chars) {
  static const std::pair<char32_t, char32_t> kRanges[] = {{'a', 'z'}, {' ', '~'}, {'\n', '\n'}, {0xC0, 0x17F},
                                                          {0x4E00, 0x9FFF}, {0x1F300, 0x1F64F}, {0x3000, 0x3000}};
  std::string s;
  for (size_t i = 0; i < chars; ++i) {
    const auto [lo, hi] = kRanges[rng() % std::size(kRanges)];
    utf8::append(s, std::uniform_int_distribution<char32_t>(lo, hi)(rng));
  }
  return s;
}

}  // namespace

TEST_CASE("a SentencePiece model: Python sentencepiece's ids for the test texts", "[tokenizer]") {
  SentencePieceTokenizer t(kTinyModel);
  for (const Case& c : kCases) {
    INFO(c.name);
    CHECK(t.encode(c.text) == kSentencePieceIds.at(c.name));
  }
  CHECK(t.vocab_size() == 420);
  CHECK(t.bos_id() == TokenId{1});
  CHECK(t.eos_id() == TokenId{2});
  CHECK(t.is_special(1));
  CHECK(t.token_to_id("<tool>") == TokenId{3});
  CHECK_FALSE(t.token_to_id("no such piece"));
}

TEST_CASE("SentencePiece: decode as the library decodes, refuses invalid UTF-8 and ids", "[tokenizer]") {
  SentencePieceTokenizer t(kTinyModel);
  const std::vector<TokenId> ids = t.encode("é日");
  REQUIRE(ids == std::vector<TokenId>{319, 352, 407});  // Python sentencepiece's
  CHECK(t.decode(std::span(ids).first(2)) == "é");
  CHECK(t.decode(std::span(ids).last(2)) == "é日");
  CHECK(t.decode(std::vector<TokenId>{1, 319, 352, 2}) == "é");  // control tokens decode to nothing
  CHECK_THROWS_WITH(t.encode("a\xFF"), Contains("not valid UTF-8 at byte 1"));
  CHECK_THROWS_WITH(t.decode(std::vector<TokenId>{420}), Contains("token id 420 is not in the vocabulary"));
  std::mt19937 rng(3);
  for (int i = 0; i < 200; ++i) {
    const std::string text = random_text(rng, 1 + rng() % 40);
    REQUIRE(t.decode(t.encode(text)) == text);
  }
}

TEST_CASE("a model trained by libsentencepiece's trainer round-trips text", "[tokenizer]") {
  const std::string path = scratch("trained.model").string();
  train_model(path);
  auto t = load_tokenizer(path);
  CHECK(t->eos_id() == TokenId{2});
  std::mt19937 rng(5);
  for (int i = 0; i < 200; ++i) {
    const std::string text = random_text(rng, 1 + rng() % 40);
    REQUIRE(t->decode(t->encode(text)) == text);
  }
  CHECK_FALSE(t->cuts_at_newlines());
}

TEST_CASE("a folder's tokenizer.model is read before its tokenizer.json; other files are refused", "[tokenizer]") {
  const auto dir = scratch("sp-folder");
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kTinyModel, dir / "tokenizer.model", std::filesystem::copy_options::overwrite_existing);
  write_scratch("sp-folder/tokenizer.json", kGpt2SplitJson);
  auto t = load_tokenizer(dir.string());
  CHECK(t->source() == (dir / "tokenizer.model").string());
  CHECK(t->encode("é日") == std::vector<TokenId>{319, 352, 407});
  // Llama 3's original/tokenizer.model is tiktoken's text, not a SentencePiece model.
  const auto fake = write_scratch("tiktoken.model", "IQ== 0\nIg== 1\n");
  CHECK_THROWS_WITH(load_tokenizer(fake.string()), Contains("not a SentencePiece model"));
}
