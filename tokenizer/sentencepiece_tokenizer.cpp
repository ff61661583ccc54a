// The wrapper around sentencepiece::SentencePieceProcessor: loading, ids as
// TokenId, and its Status turned into fsdpc::Error.
#include "tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include "ir/error.h"
#include "tokenizer/utf8.h"

namespace fsdpc {

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& path)
    : Tokenizer(path), processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  const auto status = processor_->Load(path);
  if (!status.ok()) fail(path, ": not a SentencePiece model (sentencepiece: ", status.ToString(), ")");
  set_ends();
}

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& serialized, const std::string& path)
    : Tokenizer(path), processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  const auto status = processor_->LoadFromSerializedProto(serialized);
  if (!status.ok()) fail(path, ": not a SentencePiece model (sentencepiece: ", status.ToString(), ")");
  set_ends();
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

void SentencePieceTokenizer::set_ends() {
  const auto id = [&](int v) -> std::optional<TokenId> {
    if (v < 0 || v >= processor_->GetPieceSize()) return std::nullopt;
    return static_cast<TokenId>(v);
  };
  set_bos_eos(id(processor_->bos_id()), id(processor_->eos_id()));
}

void SentencePieceTokenizer::encode_into(std::string_view text, std::vector<TokenId>& ids, bool) const {
  if (std::optional<size_t> bad = utf8::first_invalid(text)) fail("the text is not valid UTF-8 at byte ", *bad);
  std::vector<int> out;
  const auto status = processor_->Encode(absl::string_view(text.data(), text.size()), &out);
  if (!status.ok()) fail(source(), ": sentencepiece could not encode the text: ", status.ToString());
  ids.insert(ids.end(), out.begin(), out.end());
}

std::string SentencePieceTokenizer::decode(std::span<const TokenId> ids, bool) const {
  std::vector<int> in;
  in.reserve(ids.size());
  for (TokenId id : ids) {
    if (id >= static_cast<TokenId>(processor_->GetPieceSize()))
      fail("token id ", id, " is not in the vocabulary of ", source(), " (", vocab_size(), " ids)");
    in.push_back(static_cast<int>(id));
  }
  std::string text;
  const auto status = processor_->Decode(in, &text);
  if (!status.ok()) fail(source(), ": sentencepiece could not decode: ", status.ToString());
  return text;
}

int64_t SentencePieceTokenizer::vocab_size() const { return processor_->GetPieceSize(); }

std::optional<TokenId> SentencePieceTokenizer::token_to_id(std::string_view token) const {
  const int id = processor_->PieceToId(absl::string_view(token.data(), token.size()));
  // Unknown pieces map to unk: only unk's own piece is unk.
  if (id < 0 || (id == processor_->unk_id() && processor_->IdToPiece(id) != token)) return std::nullopt;
  return static_cast<TokenId>(id);
}

bool SentencePieceTokenizer::is_special(TokenId id) const {
  return id < static_cast<TokenId>(processor_->GetPieceSize()) &&
         (processor_->IsControl(static_cast<int>(id)) || processor_->IsUnknown(static_cast<int>(id)));
}

}  // namespace fsdpc
