// Token data from files: sequential windows follow the formula and wrap, the
// ranks' slices make up the world-of-one batch, random windows are a pure
// function of (seed, step, row), and every bad input says what and where.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "ir/error.h"
#include "runtime/token_data.h"

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
  CHECK_THROWS_WITH(TokenData(odd, 1000, 1), Contains(odd) && Contains("odd 5 bytes"));

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
