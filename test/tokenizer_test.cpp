// The tokenizer.json tokenizers against the reference: known ids for known
// texts (GPT-2's split, Llama 3's, Qwen2's with NFC) (tokenizer_fixtures.h: ids from Hugging Face's tokenizers, computed
// once by test/tokenizers/make_reference.py), decode(encode(x)) == x for
// random UTF-8, invalid UTF-8 refused, special tokens, byte fallback and the
// unknown token, the decoder on ids that cut a character, cutting at
// newlines, and every unsupported part of a file refused by name.
#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "ir/error.h"
#include "test/scratch.h"
#include "test/tokenizer_fixtures.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

using namespace fsdpc;
using namespace fsdpc::testing;
using Catch::Matchers::Contains;
using json = nlohmann::json;

namespace {

std::unique_ptr<HfTokenizer> from_text(const std::string& text) { return parse_hf_tokenizer_json(text, "tokenizer.json"); }

std::unique_ptr<HfTokenizer> gpt2() { return from_text(kGpt2SplitJson); }
std::unique_ptr<HfTokenizer> llama3() { return from_text(kLlama3SplitJson); }
std::unique_ptr<HfTokenizer> qwen2() { return from_text(kQwen2SplitJson); }

void check_known_ids(const Tokenizer& t, const Expected& expected) {
  for (const Case& c : kCases) {
    INFO(c.name);
    CHECK(t.encode(c.text) == expected.at(c.name));
  }
}

// Random valid UTF-8 weighted towards what text has: ASCII letters, digits,
// punctuation and whitespace runs, Latin-1, CJK, emoji, rare planes.
std::string random_utf8(std::mt19937& rng, size_t chars) {
  static const std::pair<char32_t, char32_t> kRanges[] = {
      {'a', 'z'}, {'A', 'Z'}, {'0', '9'}, {' ', '/'}, {':', '@'}, {'\t', '\r'}, {' ', ' '}, {0xA0, 0xFF},
      {0x100, 0x17F}, {0x391, 0x3C9}, {0x400, 0x44F}, {0x2000, 0x206F}, {0x3000, 0x303F}, {0x4E00, 0x9FFF},
      {0xAC00, 0xD7A3}, {0x1F300, 0x1F64F}, {0x1F3FB, 0x1F3FF}, {0x200D, 0x200D}, {0x10000, 0x10FFFF}};
  std::uniform_int_distribution<size_t> range(0, std::size(kRanges) - 1);
  std::string s;
  for (size_t i = 0; i < chars; ++i) {
    const auto [lo, hi] = kRanges[range(rng)];
    char32_t cp = std::uniform_int_distribution<char32_t>(lo, hi)(rng);
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
    utf8::append(s, cp);
  }
  return s;
}

// A tokenizer.json of the BPE model with byte fallback (make_reference.py's
// fallback_json): <unk> = 0, <0x00>..<0xFF> = 1..256, then a few tokens.
json fallback_json(bool byte_fallback) {
  json vocab = json::object();
  vocab["<unk>"] = 0;
  char name[8];
  for (int b = 0; b < 256; ++b) std::snprintf(name, sizeof name, "<0x%02X>", b), vocab[name] = 1 + b;
  for (const char* t : {"a", "b", "c", " ", "é", "ab", "abc", " a", " ab"}) vocab[t] = vocab.size();
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", json::array({{{"id", 0}, {"content", "<unk>"}, {"single_word", false}, {"lstrip", false},
                                     {"rstrip", false}, {"normalized", false}, {"special", true}}})},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithNext"}, {"invert", false}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "Sequence"}, {"decoders", json::array({{{"type", "ByteFallback"}}, {{"type", "Fuse"}},
                                                                    {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}},
      {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", "<unk>"}, {"continuing_subword_prefix", nullptr},
                 {"end_of_word_suffix", nullptr}, {"fuse_unk", true}, {"byte_fallback", byte_fallback},
                 {"ignore_merges", false}, {"vocab", vocab},
                 {"merges", json::array({json::array({"a", "b"}), json::array({"ab", "c"}), json::array({" ", "a"}),
                                         json::array({" a", "b"})})}}},
  };
}

// `edit` applied to the GPT-2 fixture must be refused with `message`.
template <class Edit>
void check_refused(Edit edit, const std::string& message) {
  json doc = json::parse(kGpt2SplitJson);
  edit(doc);
  CHECK_THROWS_WITH(from_text(doc.dump()), Contains(message));
}

}  // namespace

TEST_CASE("GPT-2's split: the reference's ids for ASCII, accents, CJK, emoji, whitespace, digits, code", "[tokenizer]") {
  check_known_ids(*gpt2(), kGpt2SplitIds);
}

TEST_CASE("Llama 3's split (digits by three, case-blind contractions, ignore_merges): the reference's ids", "[tokenizer]") {
  check_known_ids(*llama3(), kLlama3SplitIds);
}

TEST_CASE("Qwen2's layout (NFC, digits one by one, a normalized added token): the reference's ids", "[tokenizer]") {
  auto q = qwen2();
  check_known_ids(*q, kQwen2SplitIds);
  // NFC composes e + U+0301 before the split, and "café" is then the added token.
  CHECK(q->encode("cafe\u0301") == std::vector<TokenId>{400});
  CHECK(q->cuts_at_newlines());
}

TEST_CASE("Llama 2's tokenizer.json (Prepend and Replace, or Metaspace; byte fallback): the reference's ids and text", "[tokenizer]") {
  for (const char* name : {"llama2_legacy", "llama2_metaspace"}) {
    auto t = load_tokenizer(std::string(FSDPC_SOURCE_DIR) + "/test/tokenizers/" + name + ".json");
    const bool legacy = std::string(name) == "llama2_legacy";
    for (const ExpectedText& e : legacy ? kLlama2LegacyIds : kLlama2MetaspaceIds) {
      INFO(name << ": " << e.name);
      std::string text = e.name == std::string("after_special") ? kAfterSpecial : "";
      for (const Case& c : kCases)
        if (e.name == std::string(c.name)) text = c.text;
      CHECK(t->encode(text) == e.ids);
      CHECK(t->decode(e.ids) == e.decoded);
    }
    CHECK_FALSE(t->cuts_at_newlines());
  }
}

TEST_CASE("decode(encode(x)) == x for random UTF-8", "[tokenizer]") {
  std::mt19937 rng(20261129);
  for (const auto& t : {gpt2(), llama3()}) {
    for (int i = 0; i < 300; ++i) {
      const std::string text = random_utf8(rng, 1 + rng() % 60);
      const std::vector<TokenId> ids = t->encode(text);
      REQUIRE(t->decode(ids) == text);
    }
  }
}

TEST_CASE("invalid UTF-8 is refused, naming the byte", "[tokenizer]") {
  auto t = gpt2();
  CHECK_THROWS_WITH(t->encode("ok\xC3("), Contains("not valid UTF-8 at byte 2"));
  CHECK_THROWS_WITH(t->encode("abc\xED\xA0\x80"), Contains("at byte 3"));  // a surrogate
  CHECK_THROWS_WITH(t->encode("\xF4\x90\x80\x80"), Contains("at byte 0"));  // above U+10FFFF
  CHECK_THROWS_WITH(t->encode("\xC0\xAF"), Contains("at byte 0"));          // overlong
  CHECK(t->encode("").empty());
}

TEST_CASE("special tokens: read from text unless told not to, kept or skipped by decode", "[tokenizer]") {
  auto g = gpt2();
  CHECK(g->encode("a<|endoftext|>b") == std::vector<TokenId>{65, 0, 66});
  CHECK(g->encode("a<|endoftext|>b", /*parse_special=*/false).size() > 3);
  CHECK(g->decode(std::vector<TokenId>{65, 0, 66}) == "a<|endoftext|>b");  // as the reference's skip_special_tokens=False
  CHECK(g->decode(std::vector<TokenId>{65, 0, 66}, /*skip_special=*/true) == "ab");
  CHECK(g->is_special(0));
  CHECK(g->token_to_id("<|endoftext|>") == TokenId{0});
  auto l = llama3();
  // <tool> is added but not special: found in text either way.
  CHECK(l->encode("<tool>", false) == std::vector<TokenId>{420});
  CHECK(l->encode("<|end_of_text|>") == std::vector<TokenId>{1});
  CHECK(l->vocab_size() == 421);
  CHECK(l->cuts_at_newlines());
  CHECK(g->cuts_at_newlines());
  CHECK_THROWS_WITH(g->decode(std::vector<TokenId>{400}), Contains("token id 400 is not in the vocabulary"));
}

TEST_CASE("decoding ids that cut a character gives U+FFFD, as the reference does", "[tokenizer]") {
  auto g = gpt2();
  const std::vector<TokenId> ids = g->encode("é日");
  REQUIRE(ids == std::vector<TokenId>{284, 399, 99});  // the reference's
  CHECK(g->decode(std::span(ids).first(2)) == "é\xEF\xBF\xBD");
  CHECK(g->decode(std::span(ids).last(2)) == "日");
}

TEST_CASE("byte fallback and the unknown token: the reference's ids and text", "[tokenizer]") {
  auto with = from_text(fallback_json(true).dump());
  CHECK(with->encode("abc ab é日 cab  x") ==
        std::vector<TokenId>{263, 260, 262, 260, 261, 231, 152, 166, 260, 259, 262, 260, 260, 121});
  CHECK(with->encode("xyz ab") == std::vector<TokenId>{121, 122, 123, 260, 262});
  CHECK(with->decode(with->encode("abc ab é日 cab  x")) == "abc ab é日 cab  x");
  CHECK(with->decode(std::vector<TokenId>{231, 152}) == "\xEF\xBF\xBD\xEF\xBF\xBD");  // one per byte token
  auto without = from_text(fallback_json(false).dump());
  CHECK(without->encode("abc ab é日 cab  x") == std::vector<TokenId>{263, 260, 262, 260, 261, 0, 260, 259, 262, 260, 260, 0});
  CHECK(without->encode("xyz ab") == std::vector<TokenId>{0, 260, 262});  // fused
  CHECK(without->decode(without->encode("xyz ab"), /*skip_special=*/true) == "ab");  // the reference skips by default
  CHECK_FALSE(without->cuts_at_newlines());
}

TEST_CASE("text cut after a newline between printable characters encodes as the whole", "[tokenizer]") {
  std::mt19937 rng(7);
  for (const auto& t : {gpt2(), llama3(), qwen2()}) {
    for (int i = 0; i < 200; ++i) {
      const std::string a = random_utf8(rng, rng() % 30) + "x.", b = "y" + random_utf8(rng, rng() % 30);
      std::vector<TokenId> parts = t->encode(a + "\n");
      const std::vector<TokenId> second = t->encode(b);
      parts.insert(parts.end(), second.begin(), second.end());
      REQUIRE(parts == t->encode(a + "\n" + b));
    }
  }
}

TEST_CASE("every split behaviour, Digits, a prefix space and the normal forms: the reference's ids", "[tokenizer]") {
  // The GPT-2 fixture with the top-level keys of `patch` replaced
  // (make_reference.py's VARIANTS, its ids from tokenizers 0.23.3).
  struct Variant {
    const char* name;
    const char* patch;
    std::vector<TokenId> ids;
  };
  const Variant variants[] = {
    {"Split Removed", R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\s+|[,.;]"}, "behavior": "Removed", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}})", {40, 73, 282, 280, 371, 316, 17, 323, 326, 172, 106, 224, 260, 159, 240, 255, 172, 121, 95, 344, 69, 137, 224, 0, 88, 89}},
    {"Split Removed inverted", R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\s+|[,.;]"}, "behavior": "Removed", "invert": true}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}})", {12, 221, 27, 266, 221, 221, 221, 14, 202, 199, 198, 0, 221}},
    {"Split Isolated", R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\s+|[,.;]"}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}})", {40, 73, 12, 221, 282, 280, 27, 266, 371, 316, 221, 17, 323, 326, 221, 172, 106, 224, 260, 221, 159, 240, 255, 172, 121, 95, 14, 202, 199, 198, 344, 69, 137, 224, 0, 88, 221, 89}},
    {"Split Isolated inverted", R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\s+|[,.;]"}, "behavior": "Isolated", "invert": true}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}})", {40, 73, 12, 221, 282, 280, 27, 266, 371, 316, 221, 17, 323, 326, 221, 172, 106, 224, 260, 221, 159, 240, 255, 172, 121, 95, 14, 202, 199, 198, 344, 69, 137, 224, 0, 88, 221, 89}},
    {"Split MergedWithPrevious", R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\s+|[,.;]"}, "behavior": "MergedWithPrevious", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}})", {40, 73, 12, 221, 282, 280, 27, 266, 371, 316, 221, 17, 323, 326, 221, 172, 106, 224, 260, 221, 159, 240, 255, 172, 121, 95, 14, 202, 199, 198, 344, 69, 137, 224, 0, 88, 221, 89}},
    {"Split MergedWithPrevious inverted", R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\s+|[,.;]"}, "behavior": "MergedWithPrevious", "invert": true}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}})", {40, 73, 12, 303, 280, 27, 266, 371, 316, 297, 323, 326, 221, 172, 106, 224, 260, 221, 159, 240, 255, 172, 121, 95, 14, 202, 199, 198, 344, 69, 137, 224, 0, 88, 221, 89}},
    {"Split MergedWithNext", R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\s+|[,.;]"}, "behavior": "MergedWithNext", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}})", {40, 73, 12, 303, 280, 27, 266, 371, 316, 297, 323, 326, 221, 172, 106, 224, 260, 221, 159, 240, 255, 172, 121, 95, 14, 202, 199, 198, 344, 69, 137, 224, 0, 88, 221, 89}},
    {"Split MergedWithNext inverted", R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\s+|[,.;]"}, "behavior": "MergedWithNext", "invert": true}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}})", {40, 73, 12, 221, 282, 280, 27, 266, 371, 316, 221, 17, 323, 326, 221, 172, 106, 224, 260, 221, 159, 240, 255, 172, 121, 95, 14, 202, 199, 198, 344, 69, 137, 224, 0, 88, 221, 89}},
    {"Split Contiguous", R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\s+|[,.;]"}, "behavior": "Contiguous", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}})", {40, 73, 12, 221, 282, 280, 27, 266, 371, 316, 221, 17, 323, 326, 221, 172, 106, 224, 260, 221, 159, 240, 255, 172, 121, 95, 14, 202, 199, 198, 344, 69, 137, 224, 0, 88, 221, 89}},
    {"Split Contiguous inverted", R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\s+|[,.;]"}, "behavior": "Contiguous", "invert": true}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}})", {40, 73, 12, 221, 282, 280, 27, 266, 371, 316, 221, 17, 323, 326, 221, 172, 106, 224, 260, 221, 159, 240, 255, 172, 121, 95, 14, 202, 199, 198, 344, 69, 137, 224, 0, 88, 221, 89}},
    {"Split on a string", R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithNext", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}})", {40, 73, 12, 303, 280, 27, 221, 221, 371, 316, 297, 323, 326, 221, 172, 106, 224, 260, 221, 159, 240, 255, 172, 121, 95, 14, 202, 199, 198, 344, 69, 137, 224, 0, 88, 221, 89}},
    {"Digits one by one", R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]}})", {40, 73, 12, 303, 280, 27, 221, 221, 371, 316, 221, 17, 18, 19, 20, 21, 221, 172, 106, 224, 260, 221, 159, 240, 255, 172, 121, 95, 14, 202, 199, 198, 344, 69, 137, 224, 0, 88, 221, 89}},
    {"Digits grouped", R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}})", {40, 73, 12, 303, 280, 27, 266, 371, 316, 221, 17, 323, 326, 221, 172, 106, 224, 260, 221, 159, 240, 255, 172, 121, 95, 14, 202, 199, 198, 344, 69, 137, 224, 0, 88, 221, 89}},
    {"ByteLevel with a prefix space", R"({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}})", {221, 40, 73, 12, 303, 280, 27, 221, 221, 371, 316, 297, 323, 326, 221, 172, 106, 224, 260, 221, 159, 240, 255, 172, 121, 95, 14, 202, 199, 198, 344, 69, 137, 224, 0, 300, 221, 89}},
    {"NFKC", R"({"normalizer": {"type": "NFKC"}})", {40, 73, 12, 303, 280, 27, 221, 221, 371, 316, 297, 323, 326, 271, 277, 297, 33, 14, 202, 199, 198, 344, 284, 0, 88, 221, 89}},
    {"NFD", R"({"normalizer": {"type": "NFD"}})", {40, 73, 12, 303, 280, 27, 221, 221, 371, 316, 297, 323, 326, 221, 172, 106, 224, 260, 221, 159, 240, 255, 172, 121, 95, 14, 202, 199, 198, 344, 69, 137, 224, 0, 88, 221, 89}},
    {"a Sequence of NFD and NFC", R"({"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "NFC"}]}})", {40, 73, 12, 303, 280, 27, 221, 221, 371, 316, 297, 323, 326, 221, 172, 106, 224, 260, 221, 159, 240, 255, 172, 121, 95, 14, 202, 199, 198, 344, 284, 0, 88, 221, 89}},
  };
  const std::string text = "Hi, there;  we've 12345 \ufb01ne \u2460\uff21.\r\n\tcafe\u0301<|endoftext|>x y";
  for (const Variant& v : variants) {
    INFO(v.name);
    json doc = json::parse(kGpt2SplitJson);
    doc.update(json::parse(v.patch));
    CHECK(from_text(doc.dump())->encode(text) == v.ids);
  }
}

TEST_CASE("unsupported parts of a tokenizer.json are refused by name", "[tokenizer]") {
  check_refused([](json& d) { d["normalizer"] = {{"type", "Lowercase"}}; },
                "normalizer.type 'Lowercase' is not supported (supported: NFC, NFD, NFKC, NFKD, Prepend, Replace, Sequence)");
  check_refused([](json& d) { d["normalizer"] = {{"type", "NFC"}, {"form", 1}}; }, "normalizer.form: this key is not supported");
  check_refused([](json& d) { d["pre_tokenizer"] = {{"type", "Whitespace"}}; },
                "pre_tokenizer.type 'Whitespace' is not supported (supported: ByteLevel, Split, Digits, Metaspace, Sequence)");
  check_refused([](json& d) { d["model"]["type"] = "WordPiece"; }, "model.type 'WordPiece' is not supported");
  check_refused([](json& d) { d["model"]["dropout"] = 0.1; }, "model.dropout is 0.1: BPE dropout");
  check_refused([](json& d) { d["model"]["continuing_subword_prefix"] = "##"; }, "model.continuing_subword_prefix");
  check_refused([](json& d) { d["decoder"] = {{"type", "WordPiece"}}; }, "decoder.type 'WordPiece' is not supported");
  check_refused([](json& d) { d["truncation"] = {{"max_length", 8}}; }, "truncation is set");
  check_refused([](json& d) { d["added_tokens"][0]["lstrip"] = true; }, "added_tokens[0].lstrip is true for '<|endoftext|>'");
  check_refused([](json& d) { d["model"]["merges"][0] = json::array({"Ġ", "zzz"}); }, "model.merges[0]");
  check_refused([](json& d) { d["model"]["merges"][1] = "a b c"; }, "model.merges[1] 'a b c' must be two tokens");
  check_refused([](json& d) { d["model"]["fancy"] = 1; }, "model.fancy: this key is not supported");
  check_refused([](json& d) { d["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}}; },
                "does not compile");
  check_refused([](json& d) { d["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "x"}}}, {"behavior", "Sideways"}}; },
                "pre_tokenizer.behavior 'Sideways' is not supported");
  CHECK_THROWS_WITH(from_text("{\"model\": "), Contains("tokenizer.json: not a tokenizer.json"));
  CHECK_THROWS_WITH(from_text("[]"), Contains("the file is array, expected an object"));
}

TEST_CASE("load_tokenizer: a folder's tokenizer.json, its tokenizer_config.json's BOS and EOS", "[tokenizer]") {
  const auto dir = scratch("llama3-folder");
  std::filesystem::create_directories(dir);
  write_scratch("llama3-folder/tokenizer.json", kLlama3SplitJson);
  auto t = load_tokenizer(dir.string());
  CHECK(t->bos_id() == TokenId{0});  // the well-known names
  CHECK(t->eos_id() == TokenId{1});
  write_scratch("llama3-folder/tokenizer_config.json", R"({"bos_token": null, "eos_token": {"content": "<tool>"}})");
  t = load_tokenizer(dir.string());
  CHECK_FALSE(t->bos_id());  // null: none, whatever the vocabulary holds
  CHECK(t->eos_id() == TokenId{420});
  write_scratch("llama3-folder/tokenizer_config.json", R"({"eos_token": "<nope>"})");
  CHECK_THROWS_WITH(load_tokenizer(dir.string()), Contains("eos_token '<nope>' is not a token"));
  CHECK(find_tokenizer_file(dir.string()) == (dir / "tokenizer.json").string());
  const auto empty = scratch("empty-folder");
  std::filesystem::create_directories(empty);
  CHECK_THROWS_WITH(load_tokenizer(empty.string()), Contains("has no tokenizer.json or tokenizer.model"));
  CHECK_THROWS_WITH(load_tokenizer(scratch("missing").string()), Contains("no such file or folder"));
}
