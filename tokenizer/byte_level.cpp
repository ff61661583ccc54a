// The alphabet as a table built once: code point -> byte for decoding and
// byte -> code point for encoding.
#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace fsdpc::byte_level {
namespace {

struct Alphabet {
  std::array<char32_t, 256> char_of_byte{};
  std::array<int16_t, 512> byte_of_char{};  // -1: not in the alphabet; every char is < 0x144
  Alphabet() {
    byte_of_char.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char_of_byte[b] = printable ? static_cast<char32_t>(b) : next++;
      byte_of_char[char_of_byte[b]] = static_cast<int16_t>(b);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

std::string char_of(uint8_t byte) {
  std::string s;
  utf8::append(s, alphabet().char_of_byte[byte]);
  return s;
}

std::optional<std::string> bytes_of(std::string_view token) {
  const Alphabet& a = alphabet();
  std::string out;
  for (size_t i = 0; i < token.size();) {
    const auto c0 = static_cast<unsigned char>(token[i]);
    char32_t cp = 0;
    if (c0 < 0x80) {
      cp = c0, i += 1;
    } else if ((c0 & 0xE0) == 0xC0 && i + 1 < token.size()) {
      cp = ((c0 & 0x1F) << 6) | (static_cast<unsigned char>(token[i + 1]) & 0x3F), i += 2;
    } else {
      return std::nullopt;  // three bytes or more: beyond U+07FF, outside the alphabet
    }
    if (cp >= a.byte_of_char.size() || a.byte_of_char[cp] < 0) return std::nullopt;
    out += static_cast<char>(a.byte_of_char[cp]);
  }
  return out;
}

}  // namespace fsdpc::byte_level
