// Token data from files: sequential windows follow the formula and wrap, the
// ranks' slices make up the world-of-one batch, random windows are a pure
// function of (seed, step, row), uint32 files carry ids above 65535 (Llama 3),
// and every bad input says what and where, in the reader and in `fsdpc train`.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "ir/error.h"
#include "runtime/io/token_data.h"
#include "test/run_cli.h"

using namespace fsdpc;
namespace fs = std::filesystem;

namespace {
// A fresh directory per test case, removed afterwards.
struct TempDir {
  fs::path dir;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "fsdpc_token_data_XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    dir = tmpl;
  }
  ~TempDir() { fs::remove_all(dir); }
  std::string file(const std::string& name) const { return (dir / name).string(); }
};

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

// nanoGPT's train.bin: little-endian uint16.
void write_bin(const std::string& path, const std::vector<uint16_t>& tokens) {
  std::string bytes;
  for (uint16_t t : tokens) {
    bytes.push_back(static_cast<char>(t & 0xff));
    bytes.push_back(static_cast<char>(t >> 8));
  }
  write_bytes(path, bytes);
}

// Little-endian uint32, as np.array(ids, dtype=np.uint32).tofile writes.
void write_u32(const std::string& path, const std::vector<uint32_t>& tokens) {
  std::string bytes;
  for (uint32_t t : tokens)
    for (int b = 0; b < 4; ++b) bytes.push_back(static_cast<char>((t >> (8 * b)) & 0xff));
  write_bytes(path, bytes);
}

struct Batch {
  std::vector<int64_t> idx, targets;
  bool operator==(const Batch&) const = default;
};

Batch batch(const TokenData& d, int64_t step, int64_t rank, int64_t world, int64_t global) {
  const size_t n = static_cast<size_t>(global / world * d.seq());
  Batch out{std::vector<int64_t>(n, -1), std::vector<int64_t>(n, -1)};
  d.batch(step, rank, world, global, out.idx.data(), out.targets.data());
  return out;
}

std::vector<uint16_t> pattern(int64_t n) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) v[static_cast<size_t>(k)] = static_cast<uint16_t>((k * 7 + 3) % 1000);
  return v;
}
}  // namespace

TEST_CASE("sequential windows follow the formula and wrap mod W", "[token_data]") {
  TempDir tmp;
  const std::string path = tmp.file("train.bin");
  const std::vector<uint16_t> v = pattern(103);
  write_bin(path, v);
  const int64_t seq = 10, global = 4;
  const TokenData d(path, 1000, seq);
  CHECK(d.tokens() == 103);
  CHECK(d.windows() == 10);  // floor(102 / 10)
  CHECK(d.vocab_of_file() == 65536);
  CHECK(d.steps_per_epoch(global) == 3);
  for (int64_t step : {0, 1, 2, 3, 7, 1000000}) {
    const Batch b = batch(d, step, 0, 1, global);
    for (int64_t i = 0; i < global; ++i) {
      const int64_t w = (step * global + i) % 10;
      for (int64_t t = 0; t < seq; ++t) {
        CHECK(b.idx[static_cast<size_t>(i * seq + t)] == v[static_cast<size_t>(w * seq + t)]);
        CHECK(b.targets[static_cast<size_t>(i * seq + t)] == v[static_cast<size_t>(w * seq + t + 1)]);
      }
    }
  }
  // Step 2 reads windows 8, 9, then wraps to 0, 1.
  const Batch wrapped = batch(d, 2, 0, 1, global);
  CHECK(wrapped.idx[20] == v[0]);
  CHECK(wrapped.idx[30] == v[10]);
  CHECK(wrapped.targets[19] == v[100]);  // window 9's last target: the last usable token
}

TEST_CASE("the ranks' slices make up the world-of-one batch", "[token_data]") {
  TempDir tmp;
  const std::string path = tmp.file("train.bin");
  write_bin(path, pattern(1001));
  const int64_t global = 12;
  for (Sampling sampling : {Sampling::sequential, Sampling::random}) {
    const TokenData d(path, 1000, 8, sampling, 42);
    for (int64_t step : {0, 5, 99}) {
      const Batch one = batch(d, step, 0, 1, global);
      for (int64_t world = 1; world <= 4; ++world) {
        Batch joined;
        for (int64_t rank = 0; rank < world; ++rank) {
          const Batch part = batch(d, step, rank, world, global);
          joined.idx.insert(joined.idx.end(), part.idx.begin(), part.idx.end());
          joined.targets.insert(joined.targets.end(), part.targets.begin(), part.targets.end());
        }
        CHECK(joined == one);
      }
    }
  }
}

TEST_CASE("random windows are deterministic per seed, vary by step, start anywhere", "[token_data]") {
  TempDir tmp;
  const std::string path = tmp.file("train.bin");
  const int64_t len = 500, seq = 16, global = 8;
  std::vector<uint16_t> v(len);
  for (int64_t k = 0; k < len; ++k) v[static_cast<size_t>(k)] = static_cast<uint16_t>(k);  // id = offset
  write_bin(path, v);
  const TokenData a(path, 1000, seq, Sampling::random, 7), again(path, 1000, seq, Sampling::random, 7);
  const TokenData other(path, 1000, seq, Sampling::random, 8);
  CHECK(batch(a, 3, 0, 1, global) == batch(again, 3, 0, 1, global));
  CHECK_FALSE(batch(a, 3, 0, 1, global) == batch(other, 3, 0, 1, global));
  CHECK_FALSE(batch(a, 3, 0, 1, global) == batch(a, 4, 0, 1, global));

  std::set<int64_t> starts;
  for (int64_t step = 0; step < 500; ++step) {
    const Batch b = batch(a, step, 0, 1, global);
    for (int64_t i = 0; i < global; ++i) {
      const int64_t start = b.idx[static_cast<size_t>(i * seq)];
      REQUIRE(start >= 0);
      REQUIRE(start <= len - seq - 1);
      for (int64_t t = 0; t < seq; ++t) {  // a contiguous window, targets shifted by one
        REQUIRE(b.idx[static_cast<size_t>(i * seq + t)] == start + t);
        REQUIRE(b.targets[static_cast<size_t>(i * seq + t)] == start + t + 1);
      }
      starts.insert(start);
    }
  }
  // 4000 draws over 484 offsets: not only multiples of seq, and both ends reached.
  CHECK(starts.size() > 450);
  CHECK(std::any_of(starts.begin(), starts.end(), [&](int64_t s) { return s % seq != 0; }));
  CHECK(starts.count(0) == 1);
  CHECK(starts.count(len - seq - 1) == 1);
}

TEST_CASE("a non-.bin file is byte-level tokens; .bin is little-endian", "[token_data]") {
  TempDir tmp;
  const std::string text = tmp.file("input.txt");
  write_bytes(text, "hello, world\n\xff");
  const TokenData d(text, 256, 4);
  CHECK(d.tokens() == 14);
  CHECK(d.vocab_of_file() == 256);
  CHECK(d.windows() == 3);
  const Batch b = batch(d, 0, 0, 1, 3);
  const std::vector<int64_t> idx = {'h', 'e', 'l', 'l', 'o', ',', ' ', 'w', 'o', 'r', 'l', 'd'};
  const std::vector<int64_t> targets = {'e', 'l', 'l', 'o', ',', ' ', 'w', 'o', 'r', 'l', 'd', '\n'};
  CHECK(b.idx == idx);
  CHECK(b.targets == targets);
  CHECK(batch(TokenData(text, 256, 13), 0, 0, 1, 1).targets.back() == 255);  // bytes are unsigned

  const std::string bin = tmp.file("le.bin");
  write_bytes(bin, std::string("\x34\x12\xff\xff\x01\x00", 6));
  const Batch w = batch(TokenData(bin, 65536, 2), 0, 0, 1, 1);
  CHECK(w.idx == std::vector<int64_t>{0x1234, 0xffff});
  CHECK(w.targets == std::vector<int64_t>{0xffff, 1});
}

TEST_CASE("a moved TokenData keeps its mapping", "[token_data]") {
  TempDir tmp;
  const std::string path = tmp.file("train.bin");
  write_bin(path, pattern(41));
  TokenData a(path, 1000, 4);
  const Batch before = batch(a, 1, 0, 1, 2);
  TokenData b(std::move(a));
  CHECK(batch(b, 1, 0, 1, 2) == before);
  TokenData c(path, 1000, 8);
  c = std::move(b);
  CHECK(batch(c, 1, 0, 1, 2) == before);
}

TEST_CASE("bad token files and batch shapes are clear errors", "[token_data]") {
  TempDir tmp;
  using Catch::Contains;

  const std::string big = tmp.file("big.bin");
  std::vector<uint16_t> v = pattern(50);
  v[23] = 5000;
  write_bin(big, v);
  const TokenData d(big, 1000, 10);
  CHECK_NOTHROW(batch(d, 0, 0, 1, 2));  // windows 0 and 1 end at token 20
  CHECK_THROWS_WITH(batch(d, 0, 0, 1, 3),
                    Contains(big) && Contains("token 5000 at token offset 23") && Contains("vocabulary of 1000"));

  const std::string text = tmp.file("small_vocab.txt");
  write_bytes(text, "aaaaz");
  CHECK_THROWS_WITH(batch(TokenData(text, 100, 4), 0, 0, 1, 1),
                    Contains(text) && Contains("token 122 at token offset 4") && Contains("vocabulary of 100"));

  const std::string shortf = tmp.file("short.bin");
  write_bin(shortf, pattern(10));
  CHECK_THROWS_WITH(TokenData(shortf, 1000, 10),
                    Contains(shortf) && Contains("10 tokens is shorter than one window of 11 tokens"));
  CHECK_NOTHROW(TokenData(shortf, 1000, 9));
  const std::string empty = tmp.file("empty.txt");
  write_bytes(empty, "");
  CHECK_THROWS_WITH(TokenData(empty, 256, 1), Contains(empty) && Contains("0 tokens is shorter"));

  CHECK_THROWS_WITH(batch(d, 0, 0, 4, 6),
                    Contains(big) && Contains("global batch 6 is not divisible by the data-parallel world of 4"));
  CHECK_THROWS_WITH(batch(d, 0, 4, 4, 8), Contains("rank 4 is outside a world of 4"));
  CHECK_THROWS_WITH(batch(d, -1, 0, 1, 1), Contains("step must be at least 0, got -1"));
  CHECK_THROWS_WITH(batch(d, 0, 0, 1, 0), Contains("global batch must be at least 1, got 0"));

  const std::string missing = tmp.file("missing.bin");
  CHECK_THROWS_WITH(TokenData(missing, 1000, 4),
                    Contains(missing) && Contains("cannot open") && Contains("No such file"));
  CHECK_THROWS_WITH(TokenData(tmp.dir.string(), 1000, 4), Contains("not a regular file"));

  const std::string odd = tmp.file("odd.bin");
  write_bytes(odd, "12345");
  CHECK_THROWS_WITH(TokenData(odd, 1000, 1),
                    Contains(odd) && Contains("uint16 ids are 2 bytes each, but the file's 5 bytes are not a multiple of 2"));

  CHECK_THROWS_WITH(TokenData(big, 0, 4), Contains("vocabulary size must be at least 1, got 0"));
  CHECK_THROWS_WITH(TokenData(big, 1000, 0), Contains("sequence length must be at least 1, got 0"));
}

TEST_CASE("a 50 MB file is read only where a step looks", "[token_data]") {
  TempDir tmp;
  const std::string path = tmp.file("large.bin");
  const int64_t tokens = 25 * 1000 * 1000, seq = 1024;
  {
    // Sparse: all zeros but for a few marked tokens, so writing it is instant.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, 2 * tokens) == 0);
    const unsigned char last[2] = {0x39, 0x30};  // 12345 at the last usable token of the last window
    const int64_t w_last = (tokens - 1) / seq - 1;
    REQUIRE(::pwrite(fd, last, 2, 2 * ((w_last + 1) * seq)) == 2);
    REQUIRE(::close(fd) == 0);
  }
  const TokenData d(path, 50304, seq);
  CHECK(d.tokens() == tokens);
  CHECK(d.windows() == (tokens - 1) / seq);
  const int64_t global = 8, step = (d.windows() - 1) / global;  // holds the last window
  const int64_t row = (d.windows() - 1) % global;
  const Batch b = batch(d, step, 0, 1, global);
  CHECK(b.targets[static_cast<size_t>(row * seq + seq - 1)] == 12345);
  CHECK(b.idx[static_cast<size_t>(row * seq + seq - 1)] == 0);

  const TokenData r(path, 50304, seq, Sampling::random, 1);
  for (int64_t s = 0; s < 100; ++s) CHECK_NOTHROW(batch(r, s, 1, 2, global));
}

namespace {
// Llama 3 sized ids: most above 65535, every byte of an id distinct enough
// that a wrong byte order or width reads a different number.
std::vector<uint32_t> pattern32(int64_t n) {
  std::vector<uint32_t> v(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) v[static_cast<size_t>(k)] = static_cast<uint32_t>((k * 40503 + 65536) % 128256);
  return v;
}
}  // namespace

TEST_CASE("uint32 files read back ids above 65535 exactly, in every rank's slice", "[token_data]") {
  TempDir tmp;
  const std::vector<uint32_t> v = pattern32(301);
  REQUIRE(std::count_if(v.begin(), v.end(), [](uint32_t t) { return t > 65535; }) > 100);
  const std::string u32 = tmp.file("train.u32"), bin = tmp.file("megatron.bin");
  write_u32(u32, v);
  write_u32(bin, v);
  const int64_t seq = 10, global = 6, vocab = 128256;
  const TokenData by_suffix(u32, vocab, seq), asked(bin, vocab, seq, Sampling::sequential, 0, TokenDtype::uint32);
  for (const TokenData* d : {&by_suffix, &asked}) {
    CHECK(d->width() == 4);
    CHECK(d->vocab_of_file() == int64_t{1} << 32);
    CHECK(d->tokens() == 301);
    CHECK(d->windows() == 30);
    for (int64_t step : {0, 4, 5, 123}) {
      const Batch one = batch(*d, step, 0, 1, global);
      for (int64_t i = 0; i < global; ++i) {
        const int64_t w = (step * global + i) % 30;
        for (int64_t t = 0; t < seq; ++t) {
          REQUIRE(one.idx[static_cast<size_t>(i * seq + t)] == v[static_cast<size_t>(w * seq + t)]);
          REQUIRE(one.targets[static_cast<size_t>(i * seq + t)] == v[static_cast<size_t>(w * seq + t + 1)]);
        }
      }
      // dp_world 2 and 3: rank r's slice is rows [r * B / N, (r + 1) * B / N) of the world-of-one batch.
      for (int64_t world : {2, 3}) {
        const size_t rows = static_cast<size_t>(global / world * seq);
        for (int64_t rank = 0; rank < world; ++rank) {
          const Batch part = batch(*d, step, rank, world, global);
          const auto from = static_cast<std::ptrdiff_t>(rows * static_cast<size_t>(rank));
          CHECK(part.idx == std::vector<int64_t>(one.idx.begin() + from, one.idx.begin() + from + rows));
          CHECK(part.targets == std::vector<int64_t>(one.targets.begin() + from, one.targets.begin() + from + rows));
        }
      }
    }
  }
  // Random windows: the same ids, the same slicing.
  const TokenData r(u32, vocab, seq, Sampling::random, 5);
  const Batch one = batch(r, 9, 0, 1, global);
  for (int64_t world : {2, 3}) {
    Batch joined;
    for (int64_t rank = 0; rank < world; ++rank) {
      const Batch part = batch(r, 9, rank, world, global);
      joined.idx.insert(joined.idx.end(), part.idx.begin(), part.idx.end());
      joined.targets.insert(joined.targets.end(), part.targets.begin(), part.targets.end());
    }
    CHECK(joined == one);
  }

  // Little-endian whatever the host, and the full unsigned range.
  const std::string le = tmp.file("le.u32");
  write_bytes(le, std::string("\x04\x03\x02\x01\xff\xff\xff\xff\x70\x11\x01\x00", 12));
  const Batch w = batch(TokenData(le, int64_t{1} << 32, 2), 0, 0, 1, 1);
  CHECK(w.idx == std::vector<int64_t>{0x01020304, 0xffffffffLL});
  CHECK(w.targets == std::vector<int64_t>{0xffffffffLL, 70000});
}

TEST_CASE("token dtype names, and the suffixes that auto reads", "[token_data]") {
  CHECK(parse_token_dtype("auto") == TokenDtype::automatic);
  CHECK(parse_token_dtype("uint8") == TokenDtype::uint8);
  CHECK(parse_token_dtype("uint16") == TokenDtype::uint16);
  CHECK(parse_token_dtype("uint32") == TokenDtype::uint32);
  CHECK_FALSE(parse_token_dtype("int32").has_value());
  CHECK_FALSE(parse_token_dtype("").has_value());
  for (TokenDtype d : {TokenDtype::automatic, TokenDtype::uint8, TokenDtype::uint16, TokenDtype::uint32})
    CHECK(parse_token_dtype(token_dtype_name(d)) == d);
  CHECK(resolve_token_dtype("data/train.bin", TokenDtype::automatic) == TokenDtype::uint16);
  CHECK(resolve_token_dtype("data/train.u32", TokenDtype::automatic) == TokenDtype::uint32);
  CHECK(resolve_token_dtype("input.txt", TokenDtype::automatic) == TokenDtype::uint8);
  CHECK(resolve_token_dtype("train.bin.u32x", TokenDtype::automatic) == TokenDtype::uint8);
  CHECK(resolve_token_dtype("train.bin", TokenDtype::uint32) == TokenDtype::uint32);
  CHECK(resolve_token_dtype("input.txt", TokenDtype::uint16) == TokenDtype::uint16);
}

TEST_CASE("bad uint32 files and vocabularies the ids cannot hold are clear errors", "[token_data]") {
  TempDir tmp;
  using Catch::Contains;

  const std::string odd = tmp.file("odd.u32");
  write_bytes(odd, "0123456789");
  CHECK_THROWS_WITH(TokenData(odd, 128256, 1),
                    Contains(odd) && Contains("uint32 ids are 4 bytes each, but the file's 10 bytes are not a multiple of 4"));
  const std::string text = tmp.file("six.txt");
  write_bytes(text, "abcdef");
  CHECK_THROWS_WITH(TokenData(text, 256, 1, Sampling::sequential, 0, TokenDtype::uint32),
                    Contains(text) && Contains("the file's 6 bytes are not a multiple of 4"));
  CHECK_NOTHROW(TokenData(text, 256, 1, Sampling::sequential, 0, TokenDtype::uint16));

  // The lazy vocabulary check names the file, the offset and the 32-bit id.
  const std::string big = tmp.file("big.u32");
  std::vector<uint32_t> v(50, 69999);
  v[23] = 70000;
  v[40] = 0xfffffffe;
  write_u32(big, v);
  const TokenData d(big, 70000, 10);
  CHECK_NOTHROW(batch(d, 0, 0, 1, 2));
  CHECK_THROWS_WITH(batch(d, 0, 0, 1, 3),
                    Contains(big) && Contains("token 70000 at token offset 23") && Contains("vocabulary of 70000"));
  CHECK_THROWS_WITH(batch(d, 0, 1, 2, 4),  // rank 1 of 2 reads windows 2 and 3
                    Contains("token 70000 at token offset 23"));
  CHECK_THROWS_WITH(batch(TokenData(big, 70001, 10), 1, 0, 1, 4),
                    Contains("token 4294967294 at token offset 40"));

  // A Llama 3 vocabulary cannot come from uint16 ids, whether .bin says so or
  // the user does; automatic bytes are text and serve any model.
  const std::string bin = tmp.file("train.bin");
  write_bin(bin, pattern(40));
  CHECK_THROWS_WITH(TokenData(bin, 128256, 4),
                    Contains(bin) && Contains("the model's vocabulary of 128256 does not fit uint16 ids (below 65536, "
                                              "from the file's suffix)") && Contains("--data-dtype uint32"));
  CHECK_THROWS_WITH(TokenData(big, 128256, 4, Sampling::sequential, 0, TokenDtype::uint16),
                    Contains(big) && Contains("does not fit uint16 ids (below 65536, from --data-dtype)"));
  CHECK_THROWS_WITH(TokenData(text, 257, 1, Sampling::sequential, 0, TokenDtype::uint8),
                    Contains("vocabulary of 257 does not fit uint8 ids (below 256, from --data-dtype)"));
  CHECK_NOTHROW(TokenData(bin, 65536, 4));
  CHECK_NOTHROW(TokenData(text, 128256, 1));
  CHECK_NOTHROW(TokenData(text, 256, 1, Sampling::sequential, 0, TokenDtype::uint8));
}

TEST_CASE("cli: fsdpc train reads uint32 ids of a 70000-token vocabulary", "[token_data][cli]") {
  using Catch::Contains;
  using fsdpc::testing::Run;
  using fsdpc::testing::run_fsdpc;
  TempDir tmp;
  const std::string config = tmp.file("config.json");
  std::ofstream(config) << R"({"model_type": "llama", "vocab_size": 70000, "hidden_size": 16,
    "intermediate_size": 24, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
    "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": false})";
  std::vector<uint32_t> ids(200);
  for (size_t k = 0; k < ids.size(); ++k) ids[k] = static_cast<uint32_t>(65536 + (k * 37) % 4464);  // [65536, 70000)
  const std::string u32 = tmp.file("tokens.u32"), bin = tmp.file("tokens.bin");
  write_u32(u32, ids);
  write_u32(bin, ids);
  const std::string common = "train --config '" + config + "' --steps 1 --seq 16 --batch 2 --flight-dir '" +
                             tmp.file("flight") + "' ";

  for (const std::string& data : {"--data '" + u32 + "' --val-data '" + u32 + "'",
                                  "--data '" + bin + "' --data-dtype uint32"}) {
    const Run ok = run_fsdpc(common + data);
    INFO(data << "\n" << ok.out << ok.err);
    REQUIRE(ok.code == 0);
    CHECK_THAT(ok.out, Contains("done: 1 step in"));
    // An untrained model's loss is about ln(vocab): it saw 70000 classes.
    const size_t at = ok.out.find("  loss ");
    REQUIRE(at != std::string::npos);
    CHECK(std::abs(std::stod(ok.out.substr(at + 7)) - std::log(70000.0)) < 0.2);
  }

  // A .bin read as uint16 cannot serve the vocabulary: refused before a step.
  Run r = run_fsdpc(common + "--data '" + bin + "'");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains(bin) && Contains("does not fit uint16 ids") && Contains("--data-dtype uint32"));

  // An id at the vocabulary's size, at token offset 5 of the first window.
  ids[5] = 70000;
  const std::string bad = tmp.file("bad.u32");
  write_u32(bad, ids);
  r = run_fsdpc(common + "--data '" + bad + "'");
  INFO(r.out << r.err);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains(bad) && Contains("token 70000 at token offset 5") &&
                        Contains("outside the model's vocabulary of 70000"));

  const std::string odd = tmp.file("odd.u32");
  write_bytes(odd, std::string(4 * 100 + 2, '\0'));
  r = run_fsdpc(common + "--data '" + odd + "'");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains(odd) && Contains("402 bytes are not a multiple of 4"));

  r = run_fsdpc(common + "--data '" + u32 + "' --data-dtype int32");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("--data-dtype") && Contains("int32"));
  CHECK(r.out.empty());

  r = run_fsdpc("train --model llama-tiny --steps 1 --data-dtype uint32");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("--data-dtype uint32: there is no --data or --val-data FILE to read"));
}
