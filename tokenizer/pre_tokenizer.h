// Pre-tokenizers: how a text is cut into words before the BPE model sees
// them, as tokenizer.json's "pre_tokenizer" describes it. The cuts are
// PCRE2 matches (GPT-2's expression for ByteLevel, the file's own for
// Split, \p{N} for Digits) with Hugging Face's split behaviours.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"

namespace fsdpc {

// GPT-2's expression, what ByteLevel with use_regex splits by.
extern const char* const kGpt2SplitPattern;

// What becomes of a match (Hugging Face's SplitDelimiterBehavior).
enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Appends the words of `word` to `out`. Words that are not views into
  // the caller's text (a prefix space added) live in `owned`. `at_start`:
  // the word begins the text being encoded (Metaspace's "first" scheme).
  virtual void split(std::string_view word, bool at_start, std::vector<std::string_view>& out,
                     std::deque<std::string>& owned) const = 0;
};

// Split: `pattern` (a regular expression, or literal text) cut as `behavior`
// says; `invert` makes the text between matches the delimiters.
std::unique_ptr<PreTokenizer> make_split(std::unique_ptr<Regex> pattern, SplitBehavior behavior, bool invert);

// ByteLevel: a space put before a word that does not start with one
// (add_prefix_space), then GPT-2's expression when `use_regex`. Its byte
// mapping is the BPE model's (bpe_model.h: byte_level).
std::unique_ptr<PreTokenizer> make_byte_level(bool add_prefix_space, bool use_regex);

// Metaspace (SentencePiece's spaces, Llama 2's tokenizer.json): every ' '
// becomes `replacement` ("▁"), which is put before the word too when
// `prepend` says (always, or only at the start of the text), then, when
// `split`, the word is cut before each replacement.
enum class PrependScheme { always, first, never };
std::unique_ptr<PreTokenizer> make_metaspace(std::string replacement, PrependScheme prepend, bool split);

// Sequence: each in turn, on every word the one before made.
std::unique_ptr<PreTokenizer> make_sequence(std::vector<std::unique_ptr<PreTokenizer>> steps);

}  // namespace fsdpc
