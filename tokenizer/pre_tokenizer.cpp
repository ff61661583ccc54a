// The split behaviours over one word: the word is cut into the spans
// between matches and the matches themselves (an empty match still cuts),
// then the spans are kept, dropped or joined to a neighbour.
#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <utility>

namespace fsdpc {

const char* const kGpt2SplitPattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

struct Span {
  size_t begin, end;
  bool delimiter;
};

// The spans of `word` (gaps false, matches true), as the reference finds them.
void find_spans(const Regex& regex, std::string_view word, std::vector<Span>& spans) {
  size_t at = 0, prev = 0, begin = 0, end = 0;
  while (at <= word.size() && regex.find(word, at, begin, end)) {
    if (prev != begin) spans.push_back({prev, begin, false});
    spans.push_back({begin, end, true});
    prev = end;
    if (end > begin) {
      at = end;
    } else {  // an empty match: search again one character on
      if (begin >= word.size()) break;
      at = begin + 1;
      while (at < word.size() && (static_cast<unsigned char>(word[at]) & 0xC0) == 0x80) ++at;
    }
  }
  if (prev != word.size()) spans.push_back({prev, word.size(), false});
}

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(std::unique_ptr<Regex> regex, SplitBehavior behavior, bool invert)
      : regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}

  void split(std::string_view word, bool, std::vector<std::string_view>& out, std::deque<std::string>&) const override {
    thread_local std::vector<Span> spans;
    spans.clear();
    find_spans(*regex_, word, spans);
    if (invert_)
      for (Span& s : spans) s.delimiter = !s.delimiter;
    // The reference's folds over the spans: a delimiter joins the piece
    // before it (or after it) only if that piece is not a delimiter too.
    thread_local std::vector<std::pair<size_t, size_t>> pieces;
    pieces.clear();
    for (size_t i = 0; i < spans.size(); ++i) {
      const Span& s = spans[i];
      const bool previous = i > 0 && spans[i - 1].delimiter;
      switch (behavior_) {
        case SplitBehavior::removed:
          if (!s.delimiter) pieces.emplace_back(s.begin, s.end);
          break;
        case SplitBehavior::isolated:
          pieces.emplace_back(s.begin, s.end);
          break;
        case SplitBehavior::merged_with_previous:
          if (s.delimiter && !previous && !pieces.empty()) pieces.back().second = s.end;
          else pieces.emplace_back(s.begin, s.end);
          break;
        case SplitBehavior::merged_with_next:
          break;  // below, from the end
        case SplitBehavior::contiguous:
          if (i > 0 && s.delimiter == spans[i - 1].delimiter) pieces.back().second = s.end;
          else pieces.emplace_back(s.begin, s.end);
          break;
      }
    }
    if (behavior_ == SplitBehavior::merged_with_next) {
      // The reference folds from the end: a delimiter followed by a
      // non-delimiter starts that piece.
      for (size_t i = spans.size(); i-- > 0;) {
        const Span& s = spans[i];
        const bool next_delimiter = i + 1 < spans.size() && spans[i + 1].delimiter;
        if (s.delimiter && !next_delimiter && !pieces.empty()) pieces.back().first = s.begin;
        else pieces.emplace_back(s.begin, s.end);
      }
      std::reverse(pieces.begin(), pieces.end());
    }
    for (const auto& [b, e] : pieces)
      if (e > b) out.push_back(word.substr(b, e - b));
  }

 private:
  std::unique_ptr<Regex> regex_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
    if (use_regex)
      split_ = make_split(std::make_unique<Regex>(kGpt2SplitPattern, "ByteLevel"), SplitBehavior::isolated, false);
  }

  void split(std::string_view word, bool at_start, std::vector<std::string_view>& out,
             std::deque<std::string>& owned) const override {
    if (add_prefix_space_ && (word.empty() || word.front() != ' ')) {
      owned.push_back(" " + std::string(word));
      word = owned.back();
    }
    if (split_) split_->split(word, at_start, out, owned);
    else if (!word.empty()) out.push_back(word);
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<PreTokenizer> split_;
};

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme prepend, bool split)
      : replacement_(std::move(replacement)), prepend_(prepend) {
    if (split)
      split_ = make_split(std::make_unique<Regex>(replacement_, "Metaspace", /*literal=*/true),
                          SplitBehavior::merged_with_next, false);
  }

  void split(std::string_view word, bool at_start, std::vector<std::string_view>& out,
             std::deque<std::string>& owned) const override {
    std::string text;
    const bool prepend = prepend_ == PrependScheme::always || (prepend_ == PrependScheme::first && at_start);
    for (char c : word) {
      if (c == ' ') text += replacement_;
      else text += c;
    }
    if (prepend && !std::string_view(text).starts_with(replacement_)) text.insert(0, replacement_);
    owned.push_back(std::move(text));
    if (split_) split_->split(owned.back(), at_start, out, owned);
    else if (!owned.back().empty()) out.push_back(owned.back());
  }

 private:
  std::string replacement_;
  PrependScheme prepend_;
  std::unique_ptr<PreTokenizer> split_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}

  void split(std::string_view word, bool at_start, std::vector<std::string_view>& out,
             std::deque<std::string>& owned) const override {
    std::vector<std::string_view> current{word}, next;
    for (const auto& step : steps_) {
      next.clear();
      for (size_t i = 0; i < current.size(); ++i) step->split(current[i], at_start && i == 0, next, owned);
      std::swap(current, next);
    }
    out.insert(out.end(), current.begin(), current.end());
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_split(std::unique_ptr<Regex> pattern, SplitBehavior behavior, bool invert) {
  return std::make_unique<SplitPreTokenizer>(std::move(pattern), behavior, invert);
}

std::unique_ptr<PreTokenizer> make_byte_level(bool add_prefix_space, bool use_regex) {
  return std::make_unique<ByteLevelPreTokenizer>(add_prefix_space, use_regex);
}

std::unique_ptr<PreTokenizer> make_metaspace(std::string replacement, PrependScheme prepend, bool split) {
  return std::make_unique<MetaspacePreTokenizer>(std::move(replacement), prepend, split);
}

std::unique_ptr<PreTokenizer> make_sequence(std::vector<std::unique_ptr<PreTokenizer>> steps) {
  return std::make_unique<SequencePreTokenizer>(std::move(steps));
}

}  // namespace fsdpc
