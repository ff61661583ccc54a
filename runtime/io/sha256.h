// SHA-256, for checkpoint integrity and the launch fingerprint: OpenSSL's
// libcrypto (EVP) behind a small class, so no other file sees OpenSSL.
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
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, size_t bytes);
  void update(std::string_view s) { update(s.data(), s.size()); }
  // The digest; the object must not be updated afterwards.
  std::array<uint8_t, 32> digest();
  std::string hex_digest();  // 64 lowercase hex digits, as sha256sum prints

 private:
  void* ctx_;  // EVP_MD_CTX
};

std::string sha256_hex(std::string_view data);
// The file's digest, read in 1 MiB pieces; fsdpc::Error when unreadable.
std::string sha256_file_hex(const std::string& path);

}  // namespace fsdpc
