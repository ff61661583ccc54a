// Decoders: tokens back to text, as tokenizer.json's "decoder" says. Each
// step maps the list of token strings to another list (Hugging Face's
// decode_chain); the text is their concatenation at the end.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace fsdpc {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode(std::vector<std::string>& tokens) const = 0;
};

// ByteLevel: the tokens' byte-level characters back to bytes, then UTF-8
// (invalid parts as U+FFFD); a token with a character outside the alphabet
// stands for its own bytes.
std::unique_ptr<Decoder> make_byte_level_decoder();
// ByteFallback: runs of <0xXX> tokens back to bytes, one U+FFFD per token
// where the run is not UTF-8.
std::unique_ptr<Decoder> make_byte_fallback_decoder();
// Fuse: all tokens as one.
std::unique_ptr<Decoder> make_fuse_decoder();
// Strip: up to `start` leading and `stop` trailing `content` characters
// off each token.
std::unique_ptr<Decoder> make_strip_decoder(std::string content, size_t start, size_t stop);
// Replace: every `pattern` (literal text) in each token by `content`.
std::unique_ptr<Decoder> make_replace_decoder(std::string pattern, std::string content);
// Metaspace: `replacement` back to ' ', except in the first token, where it
// is dropped unless `prepend_never` (the reference's rule).
std::unique_ptr<Decoder> make_metaspace_decoder(std::string replacement, bool prepend_never);
std::unique_ptr<Decoder> make_sequence_decoder(std::vector<std::unique_ptr<Decoder>> steps);

}  // namespace fsdpc
