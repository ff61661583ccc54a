// GPT-2's byte-level alphabet: every byte is one printable character in the
// vocabulary files (the printable Latin-1 bytes stand for themselves, the
// rest for U+0100 onwards in byte order; space is 'Ġ'). The BPE model works
// on the raw bytes instead, so these convert the file's tokens once, at load.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fsdpc::byte_level {

// The character (UTF-8) that stands for `byte`.
std::string char_of(uint8_t byte);

// The bytes a token written in the alphabet stands for; nullopt if it has a
// character outside the alphabet (an added token such as "<|endoftext|>" is
// inside it: printable ASCII stands for itself).
std::optional<std::string> bytes_of(std::string_view token);

}  // namespace fsdpc::byte_level
