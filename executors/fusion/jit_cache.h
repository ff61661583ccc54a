// What the fusion executors' code caches share (the LLVM JIT's objects,
// llvm_jit.cpp, and NVRTC's CUBINs, nvrtc_compiler.cpp): a hash that is the
// same in every process and build, to name compiled code after its key, and
// the on-disk cache of FSDPC_JIT_CACHE=DIR, where each entry is a code file
// beside a .key file holding the full key (the region's signature and what
// the code also depends on: compiler version, target), so a hash collision
// or a stale entry is a miss, never wrong code.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace fsdpc::fusion {

// FNV-1a over the bytes of `s`.
uint64_t stable_hash(const std::string& s);
// 16 lowercase hex digits.
std::string hex(uint64_t v);

class DiskCache {
 public:
  // An empty `dir` disables the cache; otherwise it is created, and a
  // directory that cannot be created is an fsdpc::Error naming it.
  explicit DiskCache(const std::string& dir);

  bool enabled() const { return !dir_.empty(); }
  // The bytes of <name><ext> when <name>.key holds exactly `key`.
  std::optional<std::string> load(const std::string& name, const std::string& ext, const std::string& key) const;
  // Writes <name><ext> and <name>.key, each written beside and renamed into
  // place, so a reader sees all of a file or none. Failing to write only
  // costs a compile later, so it is silent.
  void store(const std::string& name, const std::string& ext, const std::string& key, const char* data,
             size_t size) const;

 private:
  std::filesystem::path dir_;
};

// The FSDPC_JIT_CACHE directory, or "" when unset.
std::string jit_cache_dir();

}  // namespace fsdpc::fusion
