// The Unicode normal forms through utf8proc_map, which takes a length (text
// may hold NUL bytes). ASCII is its own normal form in all four, so text
// without a byte above 0x7F is copied as it is: most text, at memcpy speed.
// Prepend and Replace as the reference's (Replace: every non-overlapping
// match, left to right).
#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "ir/error.h"

namespace fsdpc {
namespace {

bool ascii(std::string_view text) {
  for (unsigned char c : text)
    if (c >= 0x80) return false;
  return true;
}

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) {
    const int stable = UTF8PROC_STABLE;
    switch (form) {
      case NormalForm::nfc: options_ = stable | UTF8PROC_COMPOSE; break;
      case NormalForm::nfd: options_ = stable | UTF8PROC_DECOMPOSE; break;
      case NormalForm::nfkc: options_ = stable | UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
      case NormalForm::nfkd: options_ = stable | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
  }

  void normalize(std::string_view text, std::string& out) const override {
    if (ascii(text)) {
      out.assign(text);
      return;
    }
    utf8proc_uint8_t* mapped = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                            static_cast<utf8proc_ssize_t>(text.size()), &mapped,
                                            static_cast<utf8proc_option_t>(options_));
    if (n < 0) fail("the text could not be normalized (utf8proc: ", utf8proc_errmsg(n), ")");
    out.assign(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
    std::free(mapped);
  }

 private:
  int options_ = 0;
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string_view text, std::string& out) const override {
    out.clear();
    if (!text.empty()) out = prefix_;
    out.append(text);
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(const std::string& pattern, bool regex, std::string content)
      : pattern_(std::make_unique<Regex>(pattern, "normalizer Replace", !regex)), content_(std::move(content)) {}
  void normalize(std::string_view text, std::string& out) const override {
    out.clear();
    size_t at = 0, begin = 0, end = 0;
    while (at <= text.size() && pattern_->find(text, at, begin, end)) {
      out.append(text.substr(at, begin - at)).append(content_);
      if (end == begin) {  // an empty match: keep the next character, go on after it
        if (begin >= text.size()) {
          at = text.size();
          break;
        }
        size_t next = begin + 1;
        while (next < text.size() && (static_cast<unsigned char>(text[next]) & 0xC0) == 0x80) ++next;
        out.append(text.substr(begin, next - begin));
        end = next;
      }
      at = end;
    }
    if (at < text.size()) out.append(text.substr(at));
  }

 private:
  std::unique_ptr<Regex> pattern_;
  std::string content_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void normalize(std::string_view text, std::string& out) const override {
    out.assign(text);
    std::string next;
    for (const auto& step : steps_) {
      step->normalize(out, next);
      out.swap(next);
    }
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

std::unique_ptr<Normalizer> make_unicode_normalizer(NormalForm form) { return std::make_unique<UnicodeNormalizer>(form); }

std::unique_ptr<Normalizer> make_prepend_normalizer(std::string prefix) {
  return std::make_unique<PrependNormalizer>(std::move(prefix));
}

std::unique_ptr<Normalizer> make_replace_normalizer(const std::string& pattern, bool regex, std::string content) {
  return std::make_unique<ReplaceNormalizer>(pattern, regex, std::move(content));
}

std::unique_ptr<Normalizer> make_sequence_normalizer(std::vector<std::unique_ptr<Normalizer>> steps) {
  return std::make_unique<SequenceNormalizer>(std::move(steps));
}

}  // namespace fsdpc
