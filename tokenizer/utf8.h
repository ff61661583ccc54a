// UTF-8 as the tokenizers need it: where a text stops being valid (encode
// refuses it, naming the byte), and bytes made text the way Hugging Face's
// decoders do (Rust's from_utf8_lossy: each maximal invalid part is one
// U+FFFD), so that a decoded id sequence that cuts a character prints as
// the reference prints it.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace fsdpc::utf8 {

// The byte offset of the first invalid sequence in `text`, or nullopt.
std::optional<size_t> first_invalid(std::string_view text);

// `bytes` with every maximal ill-formed subsequence replaced by U+FFFD.
std::string lossy(std::string_view bytes);

// Appends code point `cp` (< 0x110000) to `out`.
void append(std::string& out, char32_t cp);

}  // namespace fsdpc::utf8
