// The merge loop: a min-heap of candidate merges ordered by (rank,
// position) over a linked list of symbols, the lowest-ranked leftmost pair
// merged first. An entry whose symbols changed since it was pushed is
// recognised when popped (its pair no longer merges to the same token) and
// dropped; the check compares the result token, as Hugging Face's does, so
// the ids are theirs even for two pairs that merge to the same token.
#include <algorithm>
#include <queue>

#include "tokenizer/bpe_model.h"

namespace fsdpc {
namespace {

struct Candidate {
  uint32_t rank;
  int32_t pos;  // the left symbol
  TokenId result;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

uint64_t pair_key(TokenId left, TokenId right) { return (static_cast<uint64_t>(left) << 32) | right; }

}  // namespace

void BpeModel::merge(std::vector<Symbol>& symbols) const {
  if (symbols.size() < 2) return;
  std::vector<Candidate> storage;
  storage.reserve(symbols.size() * 2);
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap(std::greater<Candidate>{},
                                                                                       std::move(storage));
  const auto candidate = [&](int32_t left) {
    const int32_t right = symbols[left].next;
    if (right < 0) return;
    const auto it = merges_.find(pair_key(symbols[left].id, symbols[right].id));
    if (it != merges_.end()) heap.push({it->second.rank, left, it->second.result});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) candidate(i);

  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    const auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.result != top.result) continue;  // stale
    left.id = top.result;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) candidate(left.prev);
    candidate(top.pos);
  }
  symbols.erase(std::remove_if(symbols.begin(), symbols.end(), [](const Symbol& s) { return !s.alive; }),
                symbols.end());
}

}  // namespace fsdpc
