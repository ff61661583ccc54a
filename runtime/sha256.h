// SHA-256 (FIPS 180-4), for checkpoint integrity and the launch fingerprint.
// Self-contained on purpose: libfsdpc.a's users (fsdpcConfig.cmake, fsdpc.pc)
// would otherwise all have to link libcrypto for two functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fsdpc {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t bytes);
  void update(std::string_view s) { update(s.data(), s.size()); }
  // The digest; the object must not be updated afterwards.
  std::array<uint8_t, 32> digest();
  std::string hex_digest();  // 64 lowercase hex digits, as sha256sum prints

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buffered_ = 0;
  uint64_t total_ = 0;  // bytes
};

std::string sha256_hex(std::string_view data);
// The file's digest, read in 1 MiB pieces; fsdpc::Error when unreadable.
std::string sha256_file_hex(const std::string& path);

}  // namespace fsdpc
