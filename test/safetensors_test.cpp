// Safetensors I/O: round trips, the on-disk layout byte by byte, row slices
// with shard padding, exact F16/BF16 conversion, every header error on a
// hand-crafted file, atomic writes, slice-only reads, and the sharded index.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "ir/error.h"
#include "runtime/io/safetensors.h"

using namespace fsdpc;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// A fresh folder per test, removed afterwards.
struct TempDir {
  fs::path dir;
  TempDir() {
    static int counter = 0;
    dir = fs::temp_directory_path() /
          ("fsdpc_st_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir, ec);
  }
  std::string operator/(const std::string& name) const { return (dir / name).string(); }
};

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A file with a hand-written header and data region.
std::string craft(const TempDir& t, const std::string& header, const std::string& data = "") {
  const std::string path = t / "crafted.safetensors";
  write_bytes(path, le64(header.size()) + header + data);
  return path;
}

std::string u16_bytes(const std::vector<uint16_t>& v) {
  std::string s;
  for (uint16_t x : v) s += {static_cast<char>(x & 0xff), static_cast<char>(x >> 8)};
  return s;
}

std::vector<float> read_rows(const SafetensorsFile& f, const std::string& name, int64_t begin, int64_t rows) {
  const SafetensorsEntry* e = f.find(name);
  REQUIRE(e != nullptr);
  const int64_t per_row = e->shape.empty() ? 1 : numel(Shape(e->shape.begin() + 1, e->shape.end()));
  std::vector<float> out(static_cast<size_t>(rows * per_row), std::nanf(""));  // catches unwritten floats
  f.read_rows_f32(*e, begin, rows, out.data());
  return out;
}

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

}  // namespace

TEST_CASE("safetensors: a written file reads back", "[safetensors]") {
  TempDir t;
  const std::vector<float> w = {1, -2, 3.5f, 4, 5, 6}, b = {0.25f, -0.5f, 1e-30f, 1e30f}, s = {42};
  const std::string path = t / "model.safetensors";
  write_safetensors(path,
                    {{"b.weight", {3, 2}, w.data()}, {"a.bias", {4}, b.data()}, {"scalar", {}, s.data()},
                     {"empty", {0, 5}, nullptr}},
                    {{"format", "pt"}, {"step", "7"}});
  CHECK_FALSE(fs::exists(path + ".tmp"));
  const SafetensorsFile f(path);
  REQUIRE(f.entries().size() == 4);
  CHECK(f.entries()[0].name == "a.bias");  // sorted by name
  CHECK(f.entries()[3].name == "scalar");
  for (const auto& e : f.entries()) CHECK(e.dtype == "F32");
  CHECK(f.find("b.weight")->shape == Shape{3, 2});
  CHECK(f.find("scalar")->shape == Shape{});
  CHECK(f.find("empty")->shape == Shape{0, 5});
  CHECK(f.find("missing") == nullptr);
  CHECK(f.metadata() == std::map<std::string, std::string>{{"format", "pt"}, {"step", "7"}});
  CHECK(read_rows(f, "b.weight", 0, 3) == w);
  CHECK(read_rows(f, "a.bias", 0, 4) == b);
  CHECK(read_rows(f, "scalar", 0, 1) == s);
  CHECK(read_rows(f, "empty", 0, 0).empty());
}

TEST_CASE("safetensors: the on-disk layout follows the format", "[safetensors]") {
  TempDir t;
  const std::vector<float> w = {1, 2, 3, 4, 5, 6}, b = {-1, -2, -3};
  const std::string path = t / "m.safetensors";
  write_safetensors(path, {{"w", {2, 3}, w.data()}, {"b", {3}, b.data()}, {"e", {0}, nullptr}}, {{"k", "v"}});
  const std::string bytes = read_bytes(path);
  REQUIRE(bytes.size() >= 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);  // little-endian
  REQUIRE(8 + n <= bytes.size());
  CHECK((8 + n) % 8 == 0);  // data starts aligned
  const std::string header = bytes.substr(8, n);
  CHECK(header[header.find_last_not_of(' ')] == '}');  // padded with spaces only
  // Keys are written sorted: __metadata__ ('_' < 'a'), then b, e, w.
  CHECK(header.find("\"__metadata__\"") < header.find("\"b\""));
  CHECK(header.find("\"b\"") < header.find("\"e\""));
  CHECK(header.find("\"e\"") < header.find("\"w\""));
  const auto j = nlohmann::json::parse(header);
  CHECK(j["__metadata__"] == nlohmann::json{{"k", "v"}});
  CHECK(j.size() == 4);
  const uint64_t data_size = bytes.size() - 8 - n;
  uint64_t expect_begin = 0;
  using Expected = std::tuple<std::string, Shape, const float*>;
  for (const auto& [name, shape, src] : std::vector<Expected>{{"b", {3}, b.data()}, {"e", {0}, nullptr},
                                                               {"w", {2, 3}, w.data()}}) {
    INFO(name);
    const auto& e = j[name];
    CHECK(e["dtype"] == "F32");
    CHECK(e["shape"].get<Shape>() == shape);
    const auto off = e["data_offsets"].get<std::vector<uint64_t>>();
    REQUIRE(off.size() == 2);
    CHECK(off[0] == expect_begin);  // contiguous in name order
    CHECK(off[1] - off[0] == static_cast<uint64_t>(numel(shape)) * 4);
    REQUIRE(off[1] <= data_size);
    if (src) CHECK(std::memcmp(bytes.data() + 8 + n + off[0], src, off[1] - off[0]) == 0);
    expect_begin = off[1];
  }
  CHECK(expect_begin == data_size);  // no trailing bytes
}

TEST_CASE("safetensors: row slices, with padding rows past the end read as 0", "[safetensors]") {
  TempDir t;
  std::vector<float> w(15);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) + 0.5f;
  const float s = -3;
  const std::string path = t / "m.safetensors";
  write_safetensors(path, {{"w", {5, 3}, w.data()}, {"s", {}, &s}, {"e", {0, 2}, nullptr}});
  const SafetensorsFile f(path);
  CHECK(read_rows(f, "w", 1, 2) == std::vector<float>(w.begin() + 3, w.begin() + 9));
  // ceil(5/2) = 3 rows per rank for a world of 2: rank 1 holds rows 3, 4 and one padding row.
  CHECK(read_rows(f, "w", 3, 3) == std::vector<float>{9.5f, 10.5f, 11.5f, 12.5f, 13.5f, 14.5f, 0, 0, 0});
  CHECK(read_rows(f, "w", 5, 2) == std::vector<float>(6, 0.0f));
  CHECK(read_rows(f, "w", 2, 0).empty());
  CHECK(read_rows(f, "s", 0, 2) == std::vector<float>{-3, 0});
  CHECK(read_rows(f, "s", 1, 1) == std::vector<float>{0});
  CHECK(read_rows(f, "e", 0, 2) == std::vector<float>(4, 0.0f));
  float out[3];
  CHECK_THROWS_WITH(f.read_rows_f32(*f.find("w"), -1, 1, out), Contains("'w'") && Contains("row range"));
}

TEST_CASE("safetensors: F16 and BF16 convert exactly", "[safetensors]") {
  TempDir t;
  const float inf = std::numeric_limits<float>::infinity();
  // F16: zeros, 1, -2, smallest and largest subnormals, smallest normal, max,
  // an inexact-in-decimal value, infinities, a quiet NaN.
  const std::vector<uint16_t> h = {0x0000, 0x8000, 0x3c00, 0xc000, 0x0001, 0x83ff,
                                   0x0400, 0x7bff, 0x3555, 0x7c00, 0xfc00, 0x7e00};
  const std::vector<float> h_want = {0.0f, -0.0f, 1.0f, -2.0f, std::ldexp(1.0f, -24), -std::ldexp(1023.0f, -24),
                                     std::ldexp(1.0f, -14), 65504.0f, 0.333251953125f, inf, -inf};
  // BF16: 1, -3, the smallest subnormal, 3.140625, infinities, a NaN.
  const std::vector<uint16_t> bf = {0x3f80, 0xc040, 0x0001, 0x4049, 0x7f80, 0xff80, 0x7fc1};
  const std::vector<float> bf_want = {1.0f, -3.0f, std::ldexp(1.0f, -133), 3.140625f, inf, -inf};
  const std::string header = R"({"h":{"dtype":"F16","shape":[3,4],"data_offsets":[0,24]},)"
                             R"("bf":{"dtype":"BF16","shape":[7],"data_offsets":[24,38]}})";
  const SafetensorsFile f(craft(t, header, u16_bytes(h) + u16_bytes(bf)));
  const std::vector<float> got_h = read_rows(f, "h", 0, 3), got_bf = read_rows(f, "bf", 0, 7);
  for (size_t i = 0; i < h_want.size(); ++i) {
    INFO("f16 element " << i);
    CHECK(bits(got_h[i]) == bits(h_want[i]));  // bitwise: signed zeros and subnormals exactly
  }
  CHECK(bits(got_h[11]) == 0x7fc00000u);  // quiet NaN, payload kept
  for (size_t i = 0; i < bf_want.size(); ++i) {
    INFO("bf16 element " << i);
    CHECK(bits(got_bf[i]) == bits(bf_want[i]));
  }
  CHECK(bits(got_bf[6]) == 0x7fc10000u);
  // A row slice of F16 starts at the right byte.
  CHECK(bits(read_rows(f, "h", 2, 1)[2]) == bits(-inf));
}

TEST_CASE("safetensors: bad files are rejected with what and where", "[safetensors]") {
  TempDir t;
  const std::string missing = t / "nope.safetensors";
  CHECK_THROWS_WITH(SafetensorsFile(missing), Contains(missing) && Contains("cannot open"));
  CHECK_THROWS_AS(SafetensorsFile(missing), Error);

  const std::string p = t / "crafted.safetensors";
  auto bad = [&](const std::string& bytes, const std::string& a, const std::string& b = "") {
    write_bytes(p, bytes);
    CHECK_THROWS_WITH(SafetensorsFile(p), Catch::StartsWith(p + ": ") && Contains(a) && Contains(b));
  };
  auto bad_header = [&](const std::string& header, const std::string& data, const std::string& a,
                        const std::string& b = "") {
    INFO(header);
    bad(le64(header.size()) + header + data, a, b);
  };
  bad("", "0 bytes", "shorter than the 8-byte");
  bad("abcde", "5 bytes", "shorter than the 8-byte");
  bad(le64(1000) + "{}", "header length 1000", "truncated");
  bad(le64(uint64_t{1} << 40) + "{}", "limit");
  bad_header("{\"w\": ", "", "not valid JSON");
  bad_header("{\"w\xff\": 1}", "", "not valid JSON");  // ill-formed UTF-8
  bad_header("[1, 2]", "", "not a JSON object");
  bad_header(R"({"w": 3})", "", "'w'", "not an object");
  bad_header(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", "", "'w'", "missing \"dtype\"");
  bad_header(R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", "", "'w'", "missing \"shape\"");
  bad_header(R"({"w": {"dtype": "F32", "shape": [1]}})", "", "'w'", "missing \"data_offsets\"");
  bad_header(R"({"w": {"dtype": "F99", "shape": [1], "data_offsets": [0, 4]}})", "1234", "'w'", "'F99'");
  bad_header(R"({"w": {"dtype": "F32", "shape": [-1, 2], "data_offsets": [0, 4]}})", "", "'w'", "non-negative");
  bad_header(R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", "", "'w'", "non-negative");
  bad_header(R"({"w": {"dtype": "F32", "shape": 4, "data_offsets": [0, 4]}})", "", "'w'", "non-negative");
  bad_header(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", "1234", "'w'", "[begin, end]");
  bad_header(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": ["0", 4]}})", "1234", "'w'", "[begin, end]");
  bad_header(R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", "12345678", "'w'", "begin > end");
  bad_header(R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})", std::string(24, 'x'),
             "'w'", "span 20 bytes but F32[2, 3] needs 24");
  bad_header(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", "1234", "'w'",
             "past the end of the 4-byte data (truncated)");
  bad_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
             R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
             std::string(12, 'x'), "tensors 'a' and 'b' overlap");
  bad_header(R"({"__metadata__": {"step": 3}})", "", "__metadata__", "'step' is not a string");
  bad_header(R"({"__metadata__": ["x"]})", "", "__metadata__ is not an object");

  // Valid headers: empty tensors share an offset without overlapping, gaps are allowed.
  const std::string ok = R"({"a": {"dtype": "I64", "shape": [0], "data_offsets": [4, 4]},)"
                         R"( "b": {"dtype": "F32", "shape": [], "data_offsets": [4, 8]}})";
  write_bytes(p, le64(ok.size()) + ok + "xxxx" + le64(0).substr(0, 4));
  const SafetensorsFile f(p);
  CHECK(read_rows(f, "b", 0, 1) == std::vector<float>{0});
  float out;
  CHECK_THROWS_WITH(f.read_rows_f32(*f.find("a"), 0, 0, &out), Contains("'a'") && Contains("I64"));
}

TEST_CASE("safetensors: reads touch only the rows asked for", "[safetensors]") {
  // read_rows_f32 preads just the slice's bytes: with the file cut short
  // after opening, rows before the cut still read and rows after it fail.
  TempDir t;
  std::vector<float> a(8), z(1000, 7.0f);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i);
  const std::string path = t / "m.safetensors";
  write_safetensors(path, {{"a", {4, 2}, a.data()}, {"z", {1000}, z.data()}});
  const SafetensorsFile f(path);
  const SafetensorsEntry& ea = *f.find("a");
  REQUIRE(::truncate(path.c_str(), static_cast<off_t>(ea.begin + 2 * 2 * 4)) == 0);  // keep rows 0, 1 of a
  CHECK(read_rows(f, "a", 0, 2) == std::vector<float>{0, 1, 2, 3});
  CHECK(read_rows(f, "a", 1, 1) == std::vector<float>{2, 3});
  CHECK_THROWS_WITH(read_rows(f, "a", 1, 2), Contains("end of file"));
  CHECK_THROWS_WITH(read_rows(f, "z", 0, 1), Contains(path) && Contains("end of file"));
}

TEST_CASE("safetensors: a failed write leaves the existing file intact", "[safetensors]") {
  TempDir t;
  const float x = 1;
  const std::string path = t / "ckpt.safetensors";
  write_bytes(path, "previous checkpoint");

  fs::create_directory(path + ".tmp");  // the temp file cannot be created
  CHECK_THROWS_WITH(write_safetensors(path, {{"x", {}, &x}}), Contains(path) && Contains("cannot create"));
  CHECK(read_bytes(path) == "previous checkpoint");
  CHECK(fs::is_directory(path + ".tmp"));  // not ours to remove
  fs::remove(path + ".tmp");

  const std::string dir_target = t / "dir_target";  // rename over a non-empty directory fails
  fs::create_directories(dir_target + "/inner");
  CHECK_THROWS_WITH(write_safetensors(dir_target, {{"x", {}, &x}}), Contains("cannot rename"));
  CHECK(fs::is_directory(dir_target + "/inner"));
  CHECK_FALSE(fs::exists(dir_target + ".tmp"));  // the partial temp file is removed

  CHECK_THROWS_WITH(write_safetensors(path, {{"x", {}, &x}, {"x", {}, &x}}), Contains("'x' is given twice"));
  CHECK_THROWS_WITH(write_safetensors(path, {{"__metadata__", {}, &x}}), Contains("reserved"));
  CHECK(read_bytes(path) == "previous checkpoint");

  if (::geteuid() != 0) {  // root writes through permissions
    fs::permissions(t.dir, fs::perms::owner_read | fs::perms::owner_exec);
    CHECK_THROWS_AS(write_safetensors(path, {{"x", {}, &x}}), Error);
    fs::permissions(t.dir, fs::perms::owner_all);
    CHECK(read_bytes(path) == "previous checkpoint");
  }

  write_safetensors(path, {{"x", {}, &x}});  // a successful write replaces it
  CHECK(SafetensorsFile(path).find("x") != nullptr);
  CHECK_FALSE(fs::exists(path + ".tmp"));
}

TEST_CASE("safetensors: the sharded checkpoint's index", "[safetensors]") {
  TempDir t;
  fs::create_directory(t.dir / "ckpt");
  const std::string path = t / "ckpt/model.safetensors.index.json";
  write_bytes(path, R"({"metadata": {"total_size": 48},
    "weight_map": {"h.0.w": "model-00001-of-00002.safetensors", "h.1.w": "sub/../model-00002-of-00002.safetensors"}})");
  const SafetensorsIndex index = read_safetensors_index(path);
  const fs::path folder = fs::absolute(t.dir / "ckpt");
  CHECK(index.weight_map.size() == 2);
  CHECK(index.weight_map.at("h.0.w") == (folder / "model-00001-of-00002.safetensors").string());
  CHECK(index.weight_map.at("h.1.w") == (folder / "model-00002-of-00002.safetensors").string());
  CHECK(fs::path(index.weight_map.at("h.0.w")).is_absolute());

  auto bad = [&](const std::string& text, const std::string& a, const std::string& b = "") {
    INFO(text);
    write_bytes(path, text);
    CHECK_THROWS_WITH(read_safetensors_index(path), Catch::StartsWith(path + ": ") && Contains(a) && Contains(b));
  };
  bad("{\"weight_map\": ", "not valid JSON");
  bad("[]", "not a JSON object");
  bad(R"({"metadata": {}})", "missing \"weight_map\"");
  bad(R"({"weight_map": []})", "\"weight_map\" is not an object");
  bad(R"({"weight_map": {"h.0.w": 3}})", "'h.0.w'", "not a file name");
  bad(R"({"weight_map": {"h.0.w": ""}})", "'h.0.w'", "not a file name");
  bad(R"({"metadata": 1, "weight_map": {}})", "\"metadata\" is not an object");
  const std::string missing = t / "none.index.json";
  CHECK_THROWS_WITH(read_safetensors_index(missing), Contains(missing) && Contains("cannot open"));
}
