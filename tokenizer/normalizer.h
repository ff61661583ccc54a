// Normalizers: what tokenizer.json's "normalizer" does to the text before
// the pre-tokenizer (Qwen2's NFC, Llama 2's Prepend and Replace). The Unicode
// normal forms come from utf8proc (Debian: libutf8proc-dev), the
// replacements' matches from PCRE2.
#pragma once

#include <memory>

#include "tokenizer/regex.h"
#include <string>
#include <string_view>
#include <vector>

namespace fsdpc {

enum class NormalForm { nfc, nfd, nfkc, nfkd };

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // `text` normalized into `out` (replacing it).
  virtual void normalize(std::string_view text, std::string& out) const = 0;
};

std::unique_ptr<Normalizer> make_unicode_normalizer(NormalForm form);
// Prepend: `prefix` before any text that is not empty (Llama 2's "▁").
std::unique_ptr<Normalizer> make_prepend_normalizer(std::string prefix);
// Replace: every match of `pattern` (literal text, or a regular expression
// with `regex`) by `content` (Llama 2's " " -> "▁").
std::unique_ptr<Normalizer> make_replace_normalizer(const std::string& pattern, bool regex, std::string content);
std::unique_ptr<Normalizer> make_sequence_normalizer(std::vector<std::unique_ptr<Normalizer>> steps);

}  // namespace fsdpc
