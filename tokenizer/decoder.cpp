// The decoders, each the reference's decode_chain over the token strings.
#include "tokenizer/decoder.h"

#include <optional>
#include <string_view>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace fsdpc {
namespace {

class ByteLevelDecoder : public Decoder {
 public:
  void decode(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      if (std::optional<std::string> b = byte_level::bytes_of(t)) bytes += *b;
      else bytes += t;
    }
    tokens.assign(1, utf8::lossy(bytes));
  }
};

std::optional<unsigned char> fallback_byte(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return std::nullopt;
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = digit(t[3]), lo = digit(t[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<unsigned char>(hi * 16 + lo);
}

class ByteFallbackDecoder : public Decoder {
 public:
  void decode(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string run;
    size_t run_tokens = 0;
    const auto flush = [&] {
      if (run_tokens == 0) return;
      if (!utf8::first_invalid(run)) out.push_back(run);
      else
        for (size_t k = 0; k < run_tokens; ++k) out.emplace_back("\xEF\xBF\xBD");
      run.clear(), run_tokens = 0;
    };
    for (std::string& t : tokens) {
      if (std::optional<unsigned char> b = fallback_byte(t)) {
        run += static_cast<char>(*b), ++run_tokens;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
};

class FuseDecoder : public Decoder {
 public:
  void decode(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class StripDecoder : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop) : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      std::string_view v = t;
      for (size_t k = 0; k < start_ && !content_.empty() && v.starts_with(content_); ++k) v.remove_prefix(content_.size());
      for (size_t k = 0; k < stop_ && !content_.empty() && v.ends_with(content_); ++k) v.remove_suffix(content_.size());
      t = std::string(v);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(std::string pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode(std::vector<std::string>& tokens) const override {
    if (pattern_.empty()) return;
    for (std::string& t : tokens) {
      std::string out;
      size_t at = 0;
      for (size_t hit; (hit = t.find(pattern_, at)) != std::string::npos; at = hit + pattern_.size())
        out.append(t, at, hit - at).append(content_);
      out.append(t, at, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  std::string pattern_, content_;
};

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool prepend_never)
      : replacement_(std::move(replacement)), prepend_never_(prepend_never) {}
  void decode(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      const std::string with = i == 0 && !prepend_never_ ? "" : " ";
      std::string out;
      size_t at = 0;
      for (size_t hit; !replacement_.empty() && (hit = tokens[i].find(replacement_, at)) != std::string::npos;
           at = hit + replacement_.size())
        out.append(tokens[i], at, hit - at).append(with);
      out.append(tokens[i], at, std::string::npos);
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool prepend_never_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode(std::vector<std::string>& tokens) const override {
    for (const auto& step : steps_) step->decode(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

}  // namespace

std::unique_ptr<Decoder> make_byte_level_decoder() { return std::make_unique<ByteLevelDecoder>(); }
std::unique_ptr<Decoder> make_byte_fallback_decoder() { return std::make_unique<ByteFallbackDecoder>(); }
std::unique_ptr<Decoder> make_fuse_decoder() { return std::make_unique<FuseDecoder>(); }
std::unique_ptr<Decoder> make_strip_decoder(std::string content, size_t start, size_t stop) {
  return std::make_unique<StripDecoder>(std::move(content), start, stop);
}
std::unique_ptr<Decoder> make_replace_decoder(std::string pattern, std::string content) {
  return std::make_unique<ReplaceDecoder>(std::move(pattern), std::move(content));
}
std::unique_ptr<Decoder> make_metaspace_decoder(std::string replacement, bool prepend_never) {
  return std::make_unique<MetaspaceDecoder>(std::move(replacement), prepend_never);
}
std::unique_ptr<Decoder> make_sequence_decoder(std::vector<std::unique_ptr<Decoder>> steps) {
  return std::make_unique<SequenceDecoder>(std::move(steps));
}

}  // namespace fsdpc
