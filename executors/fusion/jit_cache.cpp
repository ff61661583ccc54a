// DiskCache: plain files under FSDPC_JIT_CACHE, keyed by a .key file.
#include "executors/fusion/jit_cache.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "ir/error.h"

namespace fsdpc::fusion {

namespace {

std::optional<std::string> read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_atomically(const std::filesystem::path& p, const char* data, size_t size) {
  const std::filesystem::path tmp = p.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(data, static_cast<std::streamsize>(size));
    if (!out) return;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, p, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace

uint64_t stable_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string hex(uint64_t v) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) out[static_cast<size_t>(i)] = kHex[v & 15];
  return out;
}

DiskCache::DiskCache(const std::string& dir) : dir_(dir) {
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) fail("FSDPC_JIT_CACHE=", dir_.string(), ": cannot create the directory: ", ec.message());
}

std::optional<std::string> DiskCache::load(const std::string& name, const std::string& ext,
                                           const std::string& key) const {
  if (dir_.empty()) return std::nullopt;
  const std::optional<std::string> stored = read_file(dir_ / (name + ".key"));
  if (!stored || *stored != key) return std::nullopt;
  return read_file(dir_ / (name + ext));
}

void DiskCache::store(const std::string& name, const std::string& ext, const std::string& key, const char* data,
                      size_t size) const {
  if (dir_.empty()) return;
  write_atomically(dir_ / (name + ext), data, size);
  write_atomically(dir_ / (name + ".key"), key.data(), key.size());
}

std::string jit_cache_dir() {
  const char* dir = std::getenv("FSDPC_JIT_CACHE");
  return dir ? dir : "";
}

}  // namespace fsdpc::fusion
