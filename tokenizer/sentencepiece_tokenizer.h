// A SentencePiece tokenizer.model (Llama 2, TinyLlama, Mistral 7B v0.1),
// through the sentencepiece library itself: its ids are the reference's.
#pragma once

#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace fsdpc {

class SentencePieceTokenizer : public Tokenizer {
 public:
  // Throws fsdpc::Error naming `path` for a file sentencepiece cannot load
  // (a tiktoken "tokenizer.model" such as Llama 3's original/ is not one).
  explicit SentencePieceTokenizer(const std::string& path);
  // The same from the model's serialized bytes; `path` only names it.
  SentencePieceTokenizer(const std::string& serialized, const std::string& path);
  ~SentencePieceTokenizer() override;

  // sentencepiece reads no control token (<s>, </s>) from text, whatever
  // `parse_special` says; user-defined symbols it always reads.
  void encode_into(std::string_view text, std::vector<TokenId>& ids, bool parse_special = true) const override;
  // Control tokens decode to nothing, as sentencepiece decodes them.
  std::string decode(std::span<const TokenId> ids, bool skip_special = false) const override;
  int64_t vocab_size() const override;
  std::optional<TokenId> token_to_id(std::string_view token) const override;
  bool is_special(TokenId id) const override;

 private:
  void set_ends();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

}  // namespace fsdpc
