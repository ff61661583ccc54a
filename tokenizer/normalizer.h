// Normalizers: what tokenizer.json's "normalizer" does to the text before
// the pre-tokenizer (Qwen2's NFC). The Unicode normal forms come from
// utf8proc (Debian: libutf8proc-dev).
#pragma once

#include <memory>
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
std::unique_ptr<Normalizer> make_sequence_normalizer(std::vector<std::unique_ptr<Normalizer>> steps);

}  // namespace fsdpc
