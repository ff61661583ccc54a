// fsdpc tokenize and tokenize_files(): the token files they write hold the
// tokenizer's ids of each document with the end-of-text token between them,
// the same whatever the threads and piece sizes; TokenData reads them back;
// --val-fraction splits off the last tokens as nanoGPT does; bad input
// exits 2 with the file and byte named and leaves no file behind.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>

#include "ir/error.h"
#include "runtime/io/token_data.h"
#include "test/run_cli.h"
#include "test/scratch.h"
#include "test/tokenizer_fixtures.h"
#include "tokenizer/tokenize_files.h"
#include "tokenizer/tokenizer.h"

using namespace fsdpc;
using namespace fsdpc::testing;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

template <class T>
std::vector<TokenId> read_ids(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<T> raw(fs::file_size(path) / sizeof(T));
  in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size() * sizeof(T)));
  return {raw.begin(), raw.end()};
}

// A folder holding the GPT-2-split fixture and two documents of mixed text.
struct Fixture {
  fs::path dir = scratch("tok");
  fs::path a, b;
  Fixture() {
    fs::create_directories(dir);
    write_scratch("tok/tokenizer.json", kGpt2SplitJson);
    std::string one, two;
    for (int i = 0; i < 40; ++i)
      for (const Case& c : kCases) (i % 2 ? one : two) += std::string(c.text) + "\n";
    a = write_scratch("tok/a.txt", one);
    b = write_scratch("tok/b.txt", two);
  }
  std::string text(const fs::path& p) const {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
};

}  // namespace

TEST_CASE("tokenize: documents with end of text between them, train.bin and val.bin that TokenData reads", "[tokenize]") {
  Fixture f;
  const std::string out = (f.dir / "train.bin").string();
  const Run r = run_fsdpc("tokenize --tokenizer '" + f.dir.string() + "' '" + f.a.string() + "' '" + f.b.string() +
                          "' --out '" + out + "' --val-fraction 0.1 --threads 3");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("tokenize: 2 files"));
  auto tokenizer = load_tokenizer(f.dir.string());
  std::vector<TokenId> expected = tokenizer->encode(f.text(f.a), false);
  expected.push_back(0);  // <|endoftext|>
  const std::vector<TokenId> second = tokenizer->encode(f.text(f.b), false);
  expected.insert(expected.end(), second.begin(), second.end());
  std::vector<TokenId> got = read_ids<uint16_t>(out);
  const std::vector<TokenId> val = read_ids<uint16_t>(f.dir / "val.bin");
  CHECK(got.size() == static_cast<size_t>(static_cast<double>(expected.size()) * 0.9));  // nanoGPT's int(n * 0.9)
  got.insert(got.end(), val.begin(), val.end());
  CHECK(got == expected);
  TokenData train(out, tokenizer->vocab_size(), 16);
  TokenData valid((f.dir / "val.bin").string(), tokenizer->vocab_size(), 16);
  CHECK(train.tokens() + valid.tokens() == static_cast<int64_t>(expected.size()));
  std::vector<int64_t> idx(2 * 16), targets(2 * 16);
  train.batch(0, 0, 1, 2, idx.data(), targets.data());
  CHECK(idx[0] == expected[0]);
}

TEST_CASE("tokenize: uint32 .u32 files, and a SentencePiece model's ids", "[tokenize]") {
  Fixture f;
  const std::string model = std::string(FSDPC_SOURCE_DIR) + "/test/tokenizers/sp_tiny.model";
  const std::string out = (f.dir / "sp.u32").string();
  const Run r = run_fsdpc("tokenize --tokenizer '" + model + "' '" + f.a.string() + "' '" + f.b.string() + "' --out '" + out + "'");
  INFO(r.err);
  REQUIRE(r.code == 0);
  auto sp = load_tokenizer(model);
  std::vector<TokenId> expected = sp->encode(f.text(f.a));
  expected.push_back(2);  // </s>
  const std::vector<TokenId> second = sp->encode(f.text(f.b));
  expected.insert(expected.end(), second.begin(), second.end());
  CHECK(read_ids<uint32_t>(out) == expected);
  CHECK(TokenData(out, sp->vocab_size(), 8).width() == 4);
}

TEST_CASE("tokenize_files: the same ids whatever the threads and the size of the pieces", "[tokenize]") {
  Fixture f;
  std::string big;
  std::mt19937 rng(1);
  for (int i = 0; i < 400; ++i) big += std::string(kCases[rng() % std::size(kCases)].text) + (rng() % 3 ? "x\ny" : "\n\n");
  const fs::path input = write_scratch("tok/big.txt", big);
  for (const char* fixture : {kGpt2SplitJson, kLlama3SplitJson}) {
    write_scratch("tok/tokenizer.json", fixture);
    auto tokenizer = load_tokenizer(f.dir.string());
    REQUIRE(tokenizer->cuts_at_newlines());
    const std::vector<TokenId> whole = tokenizer->encode(big, false);
    for (auto [threads, piece] : {std::pair{1, size_t{1} << 20}, std::pair{4, size_t{64}}, std::pair{3, size_t{1}}}) {
      TokenizeOptions options;
      options.inputs = {input.string()};
      options.out = (f.dir / "pieces.u32").string();
      options.threads = threads;
      options.piece_bytes = piece;
      const TokenizeResult r = tokenize_files(*tokenizer, options);
      CHECK(r.tokens == static_cast<int64_t>(whole.size()));
      CHECK(read_ids<uint32_t>(options.out) == whole);
    }
  }
}

TEST_CASE("tokenize: bad input exits 2 naming the file and byte, and leaves no file", "[tokenize]") {
  Fixture f;
  const fs::path bad = write_scratch("tok/bad.txt", std::string(3000, 'a') + "\nok\xC3(more\n");
  const std::string out = (f.dir / "bad-train.bin").string();
  Run r = run_fsdpc("tokenize --tokenizer '" + f.dir.string() + "' '" + f.a.string() + "' '" + bad.string() + "' --out '" + out + "'");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("bad.txt: not UTF-8 text at byte 3003"));
  for (const auto& entry : fs::directory_iterator(f.dir)) CHECK_THAT(entry.path().filename().string(), !Contains("bad-train"));
  r = run_fsdpc("tokenize --tokenizer '" + f.dir.string() + "' '" + f.a.string() + "' --out '" + (f.dir / "t.txt").string() + "'");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("must end in .bin (uint16 ids) or .u32"));
  r = run_fsdpc("tokenize --tokenizer '" + f.dir.string() + "' '" + (f.dir / "missing.txt").string() + "' --out '" + out + "'");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("missing.txt: cannot open"));
  r = run_fsdpc("tokenize --tokenizer '" + f.dir.string() + "' '" + f.a.string() + "' --out '" + out + "' --eot '<nope>'");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("--eot '<nope>' is not a token"));
  r = run_fsdpc("tokenize --tokenizer '" + f.dir.string() + "' '" + f.dir.string() + "' --out '" + out + "'");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("is a folder, expected a text file"));
}

TEST_CASE("tokenize: a .bin name for a vocabulary above 65536 is refused", "[tokenize]") {
  CHECK_THROWS_WITH(token_file_width("train.bin", 128256), Contains("name it .u32"));
  CHECK(token_file_width("train.bin", 65536) == 2);
  CHECK(token_file_width("x/train.u32", 128256) == 4);
  CHECK(val_path_for("data/train.bin") == "data/val.bin");
  CHECK(val_path_for("owt.u32") == "owt.val.u32");
}
