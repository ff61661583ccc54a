// A Hugging Face tokenizer.json tokenizer: added tokens, then the
// pre-tokenizer's words, each through the BPE model; the decoder back.
// Built by read_hf_tokenizer_json() (hf_tokenizer_json.cpp), which checks
// that everything in the file is something these parts do.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace fsdpc {

struct HfTokenizerParts {
  std::vector<AddedToken> added;
  std::unique_ptr<Normalizer> normalizer;       // null: none
  std::unique_ptr<PreTokenizer> pre_tokenizer;  // null: the text is one word
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<Decoder> decoder;  // null: the tokens joined by spaces, as the reference does
  bool cuts_at_newlines = false;
};

class HfTokenizer : public Tokenizer {
 public:
  HfTokenizer(std::string source, HfTokenizerParts parts);

  void encode_into(std::string_view text, std::vector<TokenId>& ids, bool parse_special = true) const override;
  std::string decode(std::span<const TokenId> ids, bool skip_special = false) const override;
  int64_t vocab_size() const override;
  std::optional<TokenId> token_to_id(std::string_view token) const override;
  bool is_special(TokenId id) const override;
  bool cuts_at_newlines() const override { return cuts_at_newlines_; }

  const AddedTokens& added_tokens() const { return added_; }

 private:
  AddedTokens added_;                      // all of them: ids, decoding
  AddedTokens raw_split_, normalized_split_;  // the two passes of the search
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<Decoder> decoder_;
  bool cuts_at_newlines_;
};

// Reads and checks a tokenizer.json (fsdpc::Error naming the file, the
// place in it and what was expected, for anything not supported).
std::unique_ptr<HfTokenizer> read_hf_tokenizer_json(const std::string& path);
// The same from the file's text; `path` only names it in messages.
std::unique_ptr<HfTokenizer> parse_hf_tokenizer_json(const std::string& text, const std::string& path);

}  // namespace fsdpc
