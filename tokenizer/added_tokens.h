// Added tokens (tokenizer.json's "added_tokens": <|endoftext|>, Llama 3's
// <|begin_of_text|> ...): found in the text, the leftmost and then the
// longest, and turned into their ids directly; the text between them goes
// through the pre-tokenizer and the model. As in the reference, tokens
// marked "normalized" are searched for in a second pass, over the
// normalized text between the others (hf_tokenizer.cpp).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/tokenizer.h"

namespace fsdpc {

struct AddedToken {
  std::string content;
  TokenId id;
  bool special;
  bool normalized = false;  // found in the normalized text, after the others
};

class AddedTokens {
 public:
  explicit AddedTokens(std::vector<AddedToken> tokens);

  // Calls `text_part` for each stretch of ordinary text and `token` for each
  // added token found, in order. Special tokens are found only when
  // `parse_special`; the others always.
  void split(std::string_view text, bool parse_special, const std::function<void(std::string_view)>& text_part,
             const std::function<void(TokenId)>& token) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  std::optional<TokenId> id_of(std::string_view content) const;
  const AddedToken* find(TokenId id) const;

 private:
  std::vector<AddedToken> tokens_;
  std::unique_ptr<Regex> all_, non_special_;  // alternations, longest first; null when none
};

}  // namespace fsdpc
