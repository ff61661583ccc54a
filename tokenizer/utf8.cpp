// UTF-8 validation and lossy conversion after the Unicode standard's table
// of well-formed byte sequences (Table 3-7): the second byte's range depends
// on the first, which is what excludes overlong forms, surrogates and code
// points above U+10FFFF.
#include "tokenizer/utf8.h"

#include <cstdint>

namespace fsdpc::utf8 {
namespace {

// The length of the well-formed character at `i` (> 0), or minus the length
// of the maximal ill-formed subpart that starts there (< 0).
int sequence_at(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  int length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the second byte's range
  if (lead >= 0xC2 && lead <= 0xDF) length = 2;
  else if (lead == 0xE0) length = 3, low = 0xA0;
  else if (lead >= 0xE1 && lead <= 0xEC) length = 3;
  else if (lead == 0xED) length = 3, high = 0x9F;
  else if (lead >= 0xEE && lead <= 0xEF) length = 3;
  else if (lead == 0xF0) length = 4, low = 0x90;
  else if (lead >= 0xF1 && lead <= 0xF3) length = 4;
  else if (lead == 0xF4) length = 4, high = 0x8F;
  else return -1;
  for (int k = 1; k < length; ++k) {
    if (i + k >= s.size()) return -k;
    const unsigned char c = byte(i + k);
    const bool ok = k == 1 ? (c >= low && c <= high) : (c >= 0x80 && c <= 0xBF);
    if (!ok) return -k;
  }
  return length;
}

}  // namespace

std::optional<size_t> first_invalid(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    // ASCII runs eight bytes at a time: most text is mostly ASCII.
    while (i + 8 <= text.size()) {
      uint64_t word = 0;
      for (int k = 0; k < 8; ++k) word |= static_cast<uint64_t>(static_cast<unsigned char>(text[i + k])) << (8 * k);
      if (word & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= text.size()) break;
    const int n = sequence_at(text, i);
    if (n < 0) return i;
    i += static_cast<size_t>(n);
  }
  return std::nullopt;
}

std::string lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const int n = sequence_at(bytes, i);
    if (n > 0) {
      out.append(bytes.substr(i, static_cast<size_t>(n)));
      i += static_cast<size_t>(n);
    } else {
      out += "\xEF\xBF\xBD";
      i += static_cast<size_t>(-n);
    }
  }
  return out;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace fsdpc::utf8
