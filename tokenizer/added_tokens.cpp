// The added tokens' search is one PCRE2 alternation of the escaped contents,
// longest first: PCRE2 takes the leftmost match and, among the alternatives
// matching there, the first listed, which is then the longest, as the
// reference's leftmost-longest automaton.
#include "tokenizer/added_tokens.h"

#include <algorithm>
#include <cstdio>

namespace fsdpc {
namespace {

std::string escaped(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x{%02x}", c);
      out += hex;
    }
  }
  return out;
}

std::unique_ptr<Regex> alternation(std::vector<const AddedToken*> tokens) {
  std::erase_if(tokens, [](const AddedToken* t) { return t->content.empty(); });
  if (tokens.empty()) return nullptr;
  std::stable_sort(tokens.begin(), tokens.end(),
                   [](const AddedToken* a, const AddedToken* b) { return a->content.size() > b->content.size(); });
  std::string pattern;
  for (const AddedToken* t : tokens) pattern += (pattern.empty() ? "" : "|") + escaped(t->content);
  return std::make_unique<Regex>(pattern, "added_tokens");
}

}  // namespace

AddedTokens::AddedTokens(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  std::vector<const AddedToken*> all, non_special;
  for (const AddedToken& t : tokens_) {
    all.push_back(&t);
    if (!t.special) non_special.push_back(&t);
  }
  all_ = alternation(all);
  non_special_ = alternation(non_special);
}

std::optional<TokenId> AddedTokens::id_of(std::string_view content) const {
  for (const AddedToken& t : tokens_)
    if (t.content == content) return t.id;
  return std::nullopt;
}

const AddedToken* AddedTokens::find(TokenId id) const {
  for (const AddedToken& t : tokens_)
    if (t.id == id) return &t;
  return nullptr;
}

void AddedTokens::split(std::string_view text, bool parse_special,
                        const std::function<void(std::string_view)>& text_part,
                        const std::function<void(TokenId)>& token) const {
  const Regex* regex = parse_special ? all_.get() : non_special_.get();
  size_t at = 0, begin = 0, end = 0;
  while (regex != nullptr && at < text.size() && regex->find(text, at, begin, end)) {
    if (begin > at) text_part(text.substr(at, begin - at));
    const std::string_view found = text.substr(begin, end - begin);
    for (const AddedToken& t : tokens_) {
      if (t.content == found && (parse_special || !t.special)) {
        token(t.id);
        break;
      }
    }
    at = end;
  }
  if (at < text.size()) text_part(text.substr(at));
}

}  // namespace fsdpc
