// SHA-256 through OpenSSL's EVP interface; test/reliability_test.cpp checks
// the FIPS 180-2 vectors and agreement with sha256sum.
#include "runtime/io/sha256.h"

#include <openssl/evp.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "ir/error.h"

namespace fsdpc {

namespace {

EVP_MD_CTX* ctx_of(void* p) { return static_cast<EVP_MD_CTX*>(p); }

}  // namespace

// EVP calls fail only when out of memory or on a broken library: internal
// errors, not a user's.
Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  FSDPC_CHECK(ctx_ != nullptr) << "EVP_MD_CTX_new failed";
  FSDPC_CHECK(EVP_DigestInit_ex(ctx_of(ctx_), EVP_sha256(), nullptr) == 1) << "EVP_DigestInit_ex(sha256) failed";
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_of(ctx_)); }

void Sha256::update(const void* data, size_t bytes) {
  FSDPC_CHECK(EVP_DigestUpdate(ctx_of(ctx_), data, bytes) == 1) << "EVP_DigestUpdate failed";
}

std::array<uint8_t, 32> Sha256::digest() {
  std::array<uint8_t, 32> out{};
  unsigned int n = 0;
  FSDPC_CHECK(EVP_DigestFinal_ex(ctx_of(ctx_), out.data(), &n) == 1 && n == out.size()) << "EVP_DigestFinal_ex failed";
  return out;
}

std::string Sha256::hex_digest() {
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (uint8_t b : digest()) s += {kHex[b >> 4], kHex[b & 15]};
  return s;
}

std::string sha256_hex(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.hex_digest();
}

std::string sha256_file_hex(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) fail(path, ": cannot open for reading");
  Sha256 h;
  std::vector<char> buf(1 << 20);
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) h.update(buf.data(), n);
  if (std::ferror(f.get())) fail(path, ": read failed");
  return h.hex_digest();
}

}  // namespace fsdpc
