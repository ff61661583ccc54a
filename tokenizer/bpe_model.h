// The BPE model of a tokenizer.json ("model": {"type": "BPE"}): a vocabulary
// and merges by rank. A pre-token (a word) starts as one symbol per byte
// (byte-level vocabularies) or per character, and the adjacent pair of
// lowest rank is merged until no pair has a merge: Hugging Face's
// tokenizers' BPE without dropout, id for id.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace fsdpc {

// Hashes std::string keys and looks them up by std::string_view without a
// copy (C++20 heterogeneous lookup).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <class T>
using StringMap = std::unordered_map<std::string, T, StringHash, std::equal_to<>>;

struct BpeOptions {
  // The vocabulary is written in GPT-2's byte-level alphabet and the words
  // are raw bytes (a ByteLevel pre-tokenizer ran).
  bool byte_level = false;
  bool byte_fallback = false;         // unknown characters as <0xXX> byte tokens
  std::optional<std::string> unk;     // the unknown token, if any
  bool fuse_unk = false;              // consecutive unknowns as one
  bool ignore_merges = false;         // a word in the vocabulary is that token, unmerged
};

class BpeModel {
 public:
  // `vocab`: (token as written in the file, id); `merges`: pairs by rank.
  // Throws fsdpc::Error (naming `where`) for a merge whose parts or result
  // are not in the vocabulary, or an unk token that is not.
  BpeModel(const std::vector<std::pair<std::string, TokenId>>& vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options, const std::string& where);

  // Appends the ids of one word (raw bytes when byte_level).
  void encode_word(std::string_view word, std::vector<TokenId>& ids) const;

  std::optional<TokenId> token_to_id(std::string_view token) const;  // as written in the file
  // The token as written in the file; nullptr for an id the vocabulary lacks.
  const std::string* id_to_token(TokenId id) const;
  int64_t id_bound() const { return static_cast<int64_t>(tokens_.size()); }

  // One symbol of a word being merged: a token and its neighbours.
  struct Symbol {
    TokenId id;
    int32_t prev, next;  // -1 at either end
    bool alive;          // false once merged into its left neighbour
  };
  struct Merge {
    uint32_t rank;
    TokenId result;
  };

 private:
  void initial_symbols(std::string_view word, std::vector<Symbol>& symbols) const;
  bool add_byte_fallback(std::string_view character, std::vector<Symbol>& symbols) const;
  // The merge loop (bpe_merge.cpp).
  void merge(std::vector<Symbol>& symbols) const;
  std::optional<TokenId> id_of_key(std::string_view key) const;

  BpeOptions options_;
  StringMap<TokenId> ids_;                      // by key: raw bytes (byte_level) or as written
  StringMap<TokenId> file_ids_;                 // by the file's text
  std::vector<std::string> tokens_;             // the file's text by id ("" where none)
  std::vector<bool> has_token_;
  std::unordered_map<uint64_t, Merge> merges_;  // by (left id << 32 | right id)
  std::vector<int64_t> byte_ids_;               // byte -> id of that one byte, -1 if none (byte_level)
  std::vector<int64_t> fallback_ids_;           // byte -> id of <0xXX>, -1 if none
  std::optional<TokenId> unk_id_;
  uint64_t instance_;                           // tells the per-thread word caches apart
};

}  // namespace fsdpc
