// Safetensors reading, writing and index parsing (see runtime/io/safetensors.h).
// The format: 8-byte little-endian header length N, N bytes of JSON, data.
#include "runtime/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ir/error.h"

namespace fsdpc {

// The data is copied between file and memory as-is, which is the format's
// little-endian layout only on a little-endian host.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

using Json = nlohmann::json;

// A garbage length would otherwise become a huge allocation; real headers are
// kilobytes to a few megabytes. The Rust reference implementation caps at 100 MB.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// Bytes per element of the dtypes the format defines (sub-byte ones excluded).
int64_t safetensors_dtype_size(const std::string& dtype) {
  static const std::map<std::string, int64_t, std::less<>> kSizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},   {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2},  {"BF16", 2},    {"I32", 4},     {"U32", 4},
      {"F32", 4},  {"F64", 8}, {"I64", 8},  {"U64", 8},     {"C64", 8},
  };
  auto it = kSizes.find(dtype);
  return it == kSizes.end() ? 0 : it->second;
}

float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// IEEE binary16 -> binary32; every half is exactly representable as a float.
float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf, nan (payload kept)
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

std::string errno_text() { return std::strerror(errno); }

// Checks one entry's JSON and turns it into a SafetensorsEntry with offsets
// relative to the data region (made absolute by the caller).
SafetensorsEntry parse_entry(const std::string& name, const Json& j) {
  if (!j.is_object()) fail("tensor '", name, "': entry is not an object but ", j.type_name());
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!j.contains(key)) fail("tensor '", name, "': missing \"", key, "\"");
  SafetensorsEntry e;
  e.name = name;
  if (!j["dtype"].is_string()) fail("tensor '", name, "': dtype is not a string");
  e.dtype = j["dtype"].get<std::string>();
  const int64_t size = safetensors_dtype_size(e.dtype);
  if (size == 0) fail("tensor '", name, "' has unknown dtype '", e.dtype, "'");
  const Json& shape = j["shape"];
  if (!shape.is_array()) fail("tensor '", name, "': shape is not an array of non-negative integers");
  uint64_t elements = 1;
  for (const Json& d : shape) {
    if (!d.is_number_unsigned()) fail("tensor '", name, "': shape ", shape.dump(), " is not non-negative integers");
    const uint64_t v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(elements, v, &elements))
      fail("tensor '", name, "': shape ", shape.dump(), " is too large");
    e.shape.push_back(static_cast<int64_t>(v));
  }
  const Json& off = j["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    fail("tensor '", name, "': data_offsets ", off.dump(), " is not [begin, end] of non-negative integers");
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  if (e.begin > e.end) fail("tensor '", name, "': data_offsets [", e.begin, ", ", e.end, "] has begin > end");
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(elements, static_cast<uint64_t>(size), &bytes))
    fail("tensor '", name, "': shape ", shape.dump(), " is too large");
  if (e.end - e.begin != bytes)
    fail("tensor '", name, "': data_offsets span ", e.end - e.begin, " bytes but ", e.dtype, shape_str(e.shape),
         " needs ", bytes);
  return e;
}

std::map<std::string, std::string> parse_metadata(const Json& j) {
  if (!j.is_object()) fail("__metadata__ is not an object of strings");
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : j.items()) {
    if (!v.is_string()) fail("__metadata__ value of '", k, "' is not a string but ", v.type_name());
    out[k] = v.get<std::string>();
  }
  return out;
}

// Ranges must not share bytes; sorting by begin makes that a check of neighbours.
void check_no_overlap(const std::vector<SafetensorsEntry>& entries) {
  std::vector<const SafetensorsEntry*> by_begin;
  for (const auto& e : entries)
    if (e.end > e.begin) by_begin.push_back(&e);  // empty ranges hold no bytes
  std::sort(by_begin.begin(), by_begin.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_begin.size(); ++i)
    if (by_begin[i]->begin < by_begin[i - 1]->end)
      fail("tensors '", by_begin[i - 1]->name, "' and '", by_begin[i]->name, "' overlap");
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail(path, ": cannot open: ", errno_text());
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) fail("cannot stat: ", errno_text());
    if (S_ISDIR(st.st_mode)) fail("is a directory");
    const uint64_t file_size = static_cast<uint64_t>(st.st_size);
    if (file_size < 8) fail("file is ", file_size, " bytes, shorter than the 8-byte header length");
    uint64_t header_len = 0;
    read_at(0, &header_len, 8);
    if (header_len > kMaxHeaderBytes)
      fail("header length ", header_len, " is over the ", kMaxHeaderBytes, "-byte limit (not a safetensors file?)");
    if (header_len > file_size - 8)
      fail("header length ", header_len, " is past the end of the ", file_size, "-byte file (truncated)");
    std::string text(header_len, '\0');
    read_at(8, text.data(), header_len);
    Json header;
    try {
      header = Json::parse(text);  // rejects ill-formed UTF-8
    } catch (const Json::exception& ex) {
      fail("header is not valid JSON: ", ex.what());
    }
    if (!header.is_object()) fail("header is not a JSON object but ", header.type_name());
    const uint64_t data_start = 8 + header_len, data_size = file_size - data_start;
    for (const auto& [name, value] : header.items()) {  // sorted by name
      if (name == "__metadata__") {
        metadata_ = parse_metadata(value);
        continue;
      }
      SafetensorsEntry e = parse_entry(name, value);
      if (e.end > data_size)
        fail("tensor '", name, "': data_offsets [", e.begin, ", ", e.end, "] are past the end of the ", data_size,
             "-byte data (truncated)");
      e.begin += data_start;
      e.end += data_start;
      entries_.push_back(std::move(e));
    }
    check_no_overlap(entries_);
  } catch (const Error& err) {
    ::close(fd_);
    fd_ = -1;
    // read_at's messages already start with the path; the header checks' do not.
    if (std::string_view(err.what()).starts_with(path + ": ")) throw;
    fail(path, ": ", err.what());
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const SafetensorsEntry& e, std::string_view n) { return e.name < n; });
  return it != entries_.end() && it->name == name ? &*it : nullptr;
}

void SafetensorsFile::read_at(uint64_t offset, void* dst, uint64_t size) const {
  auto* p = static_cast<char*>(dst);
  while (size > 0) {
    const ssize_t n = ::pread(fd_, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(path_, ": read failed at byte ", offset, ": ", errno_text());
    if (n == 0) fail(path_, ": unexpected end of file at byte ", offset, " (truncated since it was opened?)");
    p += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<uint64_t>(n);
  }
}

void SafetensorsFile::read_rows_f32(const SafetensorsEntry& e, int64_t row_begin, int64_t rows, float* out) const {
  if (row_begin < 0 || rows < 0) fail(path_, ": tensor '", e.name, "': bad row range [", row_begin, ", +", rows, ")");
  const bool f32 = e.dtype == "F32", f16 = e.dtype == "F16", bf16 = e.dtype == "BF16";
  if (!f32 && !f16 && !bf16)
    fail(path_, ": tensor '", e.name, "' has dtype ", e.dtype, "; only F32, F16 and BF16 read as float");
  const int64_t total_rows = e.shape.empty() ? 1 : e.shape[0];
  const int64_t row_elems = e.shape.empty() ? 1 : numel(Shape(e.shape.begin() + 1, e.shape.end()));
  const int64_t stored = std::clamp<int64_t>(total_rows - row_begin, 0, rows);
  std::fill(out + stored * row_elems, out + rows * row_elems, 0.0f);  // padding rows
  if (stored == 0) return;
  const uint64_t esize = f32 ? 4 : 2;
  uint64_t offset = e.begin + static_cast<uint64_t>(row_begin * row_elems) * esize;
  uint64_t count = static_cast<uint64_t>(stored * row_elems);
  if (f32) return read_at(offset, out, count * 4);
  // Converted through a bounded buffer, so memory stays small for big slices.
  std::vector<uint16_t> buf(std::min<uint64_t>(count, 1 << 16));
  while (count > 0) {
    const uint64_t n = std::min<uint64_t>(count, buf.size());
    read_at(offset, buf.data(), n * 2);
    for (uint64_t i = 0; i < n; ++i) out[i] = f16 ? f16_to_f32(buf[i]) : bf16_to_f32(buf[i]);
    out += n;
    offset += n * 2;
    count -= n;
  }
}

namespace {

// Builds the header, space-padded so that 8 + its length is a multiple of 8
// (the data then starts 8-byte aligned, as the Python writer does).
std::string build_header(const std::vector<const SafetensorsTensor*>& sorted,
                         const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const SafetensorsTensor* t : sorted) {
    const uint64_t bytes = static_cast<uint64_t>(numel(t->shape)) * 4;
    header[t->name] = {{"dtype", "F32"}, {"shape", t->shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const Json::exception& ex) {
    fail("a tensor name or metadata string is not valid UTF-8: ", ex.what());
  }
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  return text;
}

void write_all(int fd, const void* src, uint64_t size) {
  const auto* p = static_cast<const char*>(src);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("write failed: ", errno_text());
    p += n;
    size -= static_cast<uint64_t>(n);
  }
}

}  // namespace

void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<const SafetensorsTensor*> sorted;
  for (const auto& t : tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->name < b->name; });
  for (size_t i = 0; i < sorted.size(); ++i) {
    const SafetensorsTensor& t = *sorted[i];
    if (t.name == "__metadata__") fail(path, ": '__metadata__' is reserved and cannot name a tensor");
    if (i > 0 && sorted[i - 1]->name == t.name) fail(path, ": tensor '", t.name, "' is given twice");
    for (int64_t d : t.shape)
      if (d < 0) fail(path, ": tensor '", t.name, "' has a negative dimension in ", shape_str(t.shape));
    if (numel(t.shape) > 0 && t.data == nullptr) fail(path, ": tensor '", t.name, "' has no data");
  }
  std::string header;
  try {
    header = build_header(sorted, metadata);
  } catch (const Error& err) {
    fail(path, ": ", err.what());
  }
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, ": cannot create ", tmp, ": ", errno_text());  // nothing of ours to remove
  bool closed = false;
  try {
    const uint64_t len = header.size();
    write_all(fd, &len, 8);
    write_all(fd, header.data(), header.size());
    for (const SafetensorsTensor* t : sorted) write_all(fd, t->data, static_cast<uint64_t>(numel(t->shape)) * 4);
    if (::fsync(fd) != 0) fail("fsync failed: ", errno_text());
    closed = true;  // even when close fails, the descriptor is gone (Linux)
    if (::close(fd) != 0) fail("close failed: ", errno_text());
    if (::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename ", tmp, " over it: ", errno_text());
  } catch (const Error& err) {
    if (!closed) ::close(fd);
    ::unlink(tmp.c_str());
    fail(path, ": ", err.what());
  }
  // Persist the rename itself; best effort, as the data is already durable.
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

SafetensorsIndex read_safetensors_index(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open: ", errno_text());
  std::ostringstream text;
  text << in.rdbuf();
  Json j;
  try {
    j = Json::parse(text.str());
  } catch (const Json::exception& ex) {
    fail(path, ": not valid JSON: ", ex.what());
  }
  if (!j.is_object()) fail(path, ": index is not a JSON object but ", j.type_name());
  if (j.contains("metadata") && !j["metadata"].is_object()) fail(path, ": \"metadata\" is not an object");
  if (!j.contains("weight_map")) fail(path, ": missing \"weight_map\"");
  if (!j["weight_map"].is_object()) fail(path, ": \"weight_map\" is not an object");
  const std::filesystem::path folder = std::filesystem::absolute(path).parent_path();
  SafetensorsIndex index;
  for (const auto& [tensor, file] : j["weight_map"].items()) {
    if (!file.is_string() || file.get<std::string>().empty())
      fail(path, ": weight_map entry of tensor '", tensor, "' is not a file name but ", file.dump());
    index.weight_map[tensor] = (folder / file.get<std::string>()).lexically_normal().string();
  }
  return index;
}

}  // namespace fsdpc
