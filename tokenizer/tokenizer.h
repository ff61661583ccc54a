// Text to token ids and back, with the tokenizer a Hugging Face checkpoint
// folder carries: tokenizer.json (byte-level BPE: GPT-2, Llama 3, Qwen2,
// SmolLM) or tokenizer.model (SentencePiece: Llama 2, TinyLlama, Mistral).
// What `fsdpc tokenize` and `fsdpc generate` use; it needs nothing of the IR.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fsdpc {

using TokenId = uint32_t;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // The ids of `text`, appended to `ids`: Hugging Face's
  // encode(text, add_special_tokens=False), so no BOS or EOS is added.
  // Special tokens written in the text are read as those tokens (the
  // reference's default) unless `parse_special` is false, when they are
  // ordinary text. Throws fsdpc::Error naming the byte offset of invalid
  // UTF-8 (the reference libraries take only valid text).
  virtual void encode_into(std::string_view text, std::vector<TokenId>& ids, bool parse_special = true) const = 0;
  std::vector<TokenId> encode(std::string_view text, bool parse_special = true) const {
    std::vector<TokenId> ids;
    encode_into(text, ids, parse_special);
    return ids;
  }

  // The text of `ids`, as the reference decodes it: bytes that do not form
  // UTF-8 (ids that cut a character) become U+FFFD. Throws fsdpc::Error for
  // an id outside the vocabulary.
  virtual std::string decode(std::span<const TokenId> ids, bool skip_special = false) const = 0;

  // One more than the largest id: what a token file's width must hold and a
  // model's embedding must have rows for.
  virtual int64_t vocab_size() const = 0;
  virtual std::optional<TokenId> token_to_id(std::string_view token) const = 0;
  virtual bool is_special(TokenId id) const = 0;

  // The beginning- and end-of-text tokens, where the tokenizer names them
  // (tokenizer_config.json's bos_token/eos_token, the SentencePiece model's,
  // or a well-known special token such as <|endoftext|>).
  std::optional<TokenId> bos_id() const { return bos_; }
  std::optional<TokenId> eos_id() const { return eos_; }
  void set_bos_eos(std::optional<TokenId> bos, std::optional<TokenId> eos) { bos_ = bos, eos_ = eos; }

  // Whether text may be cut after a '\n' that sits between two printable
  // ASCII characters (0x21-0x7E) with the ids of the parts, concatenated,
  // equal to the ids of the whole: true where the pre-tokenizer is known to
  // split there anyway (GPT-2's and Llama 3's expressions). It lets `fsdpc
  // tokenize` spread one long document over threads and stream it.
  virtual bool cuts_at_newlines() const { return false; }

  // The file it was read from.
  const std::string& source() const { return source_; }

 protected:
  explicit Tokenizer(std::string source) : source_(std::move(source)) {}

 private:
  std::string source_;
  std::optional<TokenId> bos_, eos_;
};

// Reads a tokenizer from a checkpoint folder (its tokenizer.model if there
// is one, else its tokenizer.json; the BOS and EOS tokens from its
// tokenizer_config.json when present), a tokenizer.json or a SentencePiece
// .model file. Anything in the file it does not support is refused by name
// (fsdpc::Error), never read as something else.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

// The tokenizer file load_tokenizer would read for `path` ("" if a folder
// has none): lets `fsdpc generate --init DIR` use a folder's tokenizer when
// there is one.
std::string find_tokenizer_file(const std::string& path);

}  // namespace fsdpc
