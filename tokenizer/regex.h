// A compiled PCRE2 expression over UTF-8 with Unicode classes (\p{L}, \s
// as Unicode sees them), JIT-compiled where PCRE2 has a JIT: the
// pre-tokenizers' splits and the added tokens' search. Patterns are
// Hugging Face's (written for Oniguruma); the ones tokenizers ship use
// only syntax both read alike.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace fsdpc {

class Regex {
 public:
  // Throws fsdpc::Error naming `where` and PCRE2's message for a pattern it
  // cannot compile. `literal`: the pattern is the text itself.
  Regex(const std::string& pattern, const std::string& where, bool literal = false);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // The first match in `subject` at or after `start`: true and [begin, end),
  // or false. `subject` must be valid UTF-8 (checked by the caller once).
  bool find(std::string_view subject, size_t start, size_t& begin, size_t& end) const;

  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8
};

// True when this PCRE2 was built with its JIT (else matching interprets).
bool regex_jit_available();

}  // namespace fsdpc
