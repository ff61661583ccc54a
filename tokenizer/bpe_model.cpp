// The BPE model's tables, a word's first symbols (bytes, or characters with
// byte fallback and the unknown token), and a per-thread cache of the words
// already merged: real text repeats its words, and merging is the cost.
#include "tokenizer/bpe_model.h"

#include <atomic>
#include <cstdio>

#include "ir/error.h"
#include "tokenizer/byte_level.h"

namespace fsdpc {
namespace {

// Words up to this many bytes are cached, up to kCacheEntries of them per
// thread (the cache is emptied when full: simple, and text's common words
// come back at once).
constexpr size_t kCachedWordBytes = 48;
constexpr size_t kCacheEntries = 1 << 17;

std::atomic<uint64_t> next_instance{1};

struct WordCache {
  uint64_t owner = 0;
  StringMap<std::vector<TokenId>> words;
};

size_t char_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  return 4;
}

}  // namespace

BpeModel::BpeModel(const std::vector<std::pair<std::string, TokenId>>& vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
                   const std::string& where)
    : options_(std::move(options)), instance_(next_instance++) {
  TokenId bound = 0;
  for (const auto& [token, id] : vocab) bound = std::max(bound, id + 1);
  tokens_.resize(bound);
  has_token_.resize(bound);
  for (const auto& [token, id] : vocab) {
    tokens_[id] = token;
    has_token_[id] = true;
    file_ids_[token] = id;
    if (!options_.byte_level) {
      ids_[token] = id;
    } else if (std::optional<std::string> bytes = byte_level::bytes_of(token)) {
      ids_[*bytes] = id;
    }
  }
  byte_ids_.assign(256, -1);
  fallback_ids_.assign(256, -1);
  for (int b = 0; b < 256; ++b) {
    if (options_.byte_level) {
      if (auto id = id_of_key(std::string(1, static_cast<char>(b)))) byte_ids_[b] = *id;
    }
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    if (auto it = file_ids_.find(name); it != file_ids_.end()) fallback_ids_[b] = it->second;
  }
  if (options_.unk) {
    auto it = file_ids_.find(*options_.unk);
    if (it == file_ids_.end()) fail(where, ": model.unk_token '", *options_.unk, "' is not in model.vocab");
    unk_id_ = it->second;
  }
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const auto ia = file_ids_.find(a), ib = file_ids_.find(b), ir = file_ids_.find(a + b);
    if (ia == file_ids_.end() || ib == file_ids_.end() || ir == file_ids_.end())
      fail(where, ": model.merges[", rank, "] '", a, " ", b, "': ",
           ia == file_ids_.end() ? "'" + a + "'" : ib == file_ids_.end() ? "'" + b + "'" : "'" + a + b + "'",
           " is not in model.vocab");
    // A repeated pair keeps its last rank, as the reference's map does.
    merges_[(static_cast<uint64_t>(ia->second) << 32) | ib->second] = Merge{static_cast<uint32_t>(rank), ir->second};
  }
}

std::optional<TokenId> BpeModel::id_of_key(std::string_view key) const {
  auto it = ids_.find(key);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

std::optional<TokenId> BpeModel::token_to_id(std::string_view token) const {
  auto it = file_ids_.find(token);
  if (it == file_ids_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(TokenId id) const {
  return id < tokens_.size() && has_token_[id] ? &tokens_[id] : nullptr;
}

bool BpeModel::add_byte_fallback(std::string_view character, std::vector<Symbol>& symbols) const {
  if (!options_.byte_fallback) return false;
  for (unsigned char c : character)
    if (fallback_ids_[c] < 0) return false;
  for (unsigned char c : character) symbols.push_back({static_cast<TokenId>(fallback_ids_[c]), 0, 0, true});
  return true;
}

// The reference's order, bug for bug: a pending unknown is written when the
// next known character comes, and byte-fallback tokens do not write it.
void BpeModel::initial_symbols(std::string_view word, std::vector<Symbol>& symbols) const {
  int64_t pending_unk = -1;  // an unknown not yet written
  for (size_t i = 0; i < word.size();) {
    std::optional<TokenId> id;
    std::string character;
    size_t length = 1;
    if (options_.byte_level) {
      const auto b = static_cast<unsigned char>(word[i]);
      if (byte_ids_[b] >= 0) id = static_cast<TokenId>(byte_ids_[b]);
      else character = byte_level::char_of(b);
    } else {
      length = std::min(char_length(static_cast<unsigned char>(word[i])), word.size() - i);
      character.assign(word.substr(i, length));
      id = id_of_key(character);
    }
    i += length;
    if (id) {
      if (pending_unk >= 0) symbols.push_back({static_cast<TokenId>(pending_unk), 0, 0, true}), pending_unk = -1;
      symbols.push_back({*id, 0, 0, true});
      continue;
    }
    if (add_byte_fallback(character, symbols)) continue;
    if (unk_id_) {
      if (pending_unk >= 0 && !options_.fuse_unk) symbols.push_back({static_cast<TokenId>(pending_unk), 0, 0, true});
      pending_unk = *unk_id_;
    }
    // Neither: the character is dropped, as the reference drops it.
  }
  if (pending_unk >= 0) symbols.push_back({static_cast<TokenId>(pending_unk), 0, 0, true});
  for (size_t k = 0; k < symbols.size(); ++k) {
    symbols[k].prev = static_cast<int32_t>(k) - 1;
    symbols[k].next = k + 1 < symbols.size() ? static_cast<int32_t>(k + 1) : -1;
  }
}

void BpeModel::encode_word(std::string_view word, std::vector<TokenId>& ids) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (auto id = id_of_key(word)) {
      ids.push_back(*id);
      return;
    }
  }
  thread_local WordCache cache;
  const bool cached = word.size() <= kCachedWordBytes;
  if (cached) {
    if (cache.owner != instance_) cache.words.clear(), cache.owner = instance_;
    if (auto it = cache.words.find(word); it != cache.words.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  thread_local std::vector<Symbol> symbols;
  symbols.clear();
  initial_symbols(word, symbols);
  merge(symbols);
  const size_t first = ids.size();
  for (const Symbol& s : symbols) ids.push_back(s.id);
  if (cached) {
    if (cache.words.size() >= kCacheEntries) cache.words.clear();
    cache.words.emplace(std::string(word), std::vector<TokenId>(ids.begin() + first, ids.end()));
  }
}

}  // namespace fsdpc
