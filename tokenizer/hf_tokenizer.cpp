// Encoding and decoding with a tokenizer.json's parts, in the reference's
// order: added tokens not marked normalized split first, the normalizer on
// the text between them, the normalized added tokens split next, the
// pre-tokenizer on what is left, the BPE model per word; decoding maps ids to their tokens (added
// ones first) and runs the decoder.
#include "tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <deque>

#include "ir/error.h"
#include "tokenizer/utf8.h"

namespace fsdpc {
namespace {

std::vector<AddedToken> only(const std::vector<AddedToken>& tokens, bool normalized) {
  std::vector<AddedToken> some;
  for (const AddedToken& t : tokens)
    if (t.normalized == normalized) some.push_back(t);
  return some;
}

}  // namespace

HfTokenizer::HfTokenizer(std::string source, HfTokenizerParts parts)
    : Tokenizer(std::move(source)),
      added_(parts.added),
      raw_split_(only(parts.added, false)),
      normalized_split_(only(parts.added, true)),
      normalizer_(std::move(parts.normalizer)),
      pre_tokenizer_(std::move(parts.pre_tokenizer)),
      model_(std::move(parts.model)),
      decoder_(std::move(parts.decoder)),
      cuts_at_newlines_(parts.cuts_at_newlines) {}

void HfTokenizer::encode_into(std::string_view text, std::vector<TokenId>& ids, bool parse_special) const {
  if (std::optional<size_t> bad = utf8::first_invalid(text)) fail("the text is not valid UTF-8 at byte ", *bad);
  thread_local std::vector<std::string_view> words;
  thread_local std::deque<std::string> owned;
  const auto push = [&](TokenId id) { ids.push_back(id); };
  const char* start = nullptr;  // where the text being pre-tokenized begins (Metaspace's "first")
  const auto words_of = [&](std::string_view part) {
    words.clear();
    owned.clear();
    if (pre_tokenizer_) pre_tokenizer_->split(part, part.data() == start, words, owned);
    else words.push_back(part);
    for (std::string_view w : words) model_->encode_word(w, ids);
  };
  raw_split_.split(
      text, parse_special,
      [&](std::string_view part) {
        const bool at_start = part.data() == text.data();
        std::string normalized;
        if (normalizer_) {
          normalizer_->normalize(part, normalized);
          part = normalized;
        }
        start = at_start ? part.data() : nullptr;
        normalized_split_.split(part, parse_special, words_of, push);
      },
      push);
}

std::string HfTokenizer::decode(std::span<const TokenId> ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (TokenId id : ids) {
    if (const AddedToken* added = added_.find(id)) {
      if (!(skip_special && added->special)) tokens.push_back(added->content);
    } else if (const std::string* token = model_->id_to_token(id)) {
      tokens.push_back(*token);
    } else {
      fail("token id ", id, " is not in the vocabulary of ", source(), " (", vocab_size(), " ids)");
    }
  }
  if (!decoder_) {
    std::string joined;
    for (size_t i = 0; i < tokens.size(); ++i) joined += (i ? " " : "") + tokens[i];
    return joined;
  }
  decoder_->decode(tokens);
  std::string text;
  for (const std::string& t : tokens) text += t;
  return text;
}

int64_t HfTokenizer::vocab_size() const {
  int64_t bound = model_->id_bound();
  for (const AddedToken& t : added_.tokens()) bound = std::max<int64_t>(bound, int64_t{t.id} + 1);
  return bound;
}

std::optional<TokenId> HfTokenizer::token_to_id(std::string_view token) const {
  if (auto id = added_.id_of(token)) return id;
  return model_->token_to_id(token);
}

bool HfTokenizer::is_special(TokenId id) const {
  const AddedToken* added = added_.find(id);
  return added != nullptr && added->special;
}

}  // namespace fsdpc
