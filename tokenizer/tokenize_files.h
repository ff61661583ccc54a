// Text files to the token files `fsdpc train --data` reads (what `fsdpc
// tokenize` runs): each input file is a document, the separator token
// (the tokenizer's end of text) between documents, as nanoGPT prepares
// OpenWebText. Files are memory-mapped and cut into pieces the threads
// encode at once (tokenizer.h: cuts_at_newlines), written in order as they
// finish, so inputs larger than memory stream through; outputs appear
// whole or not at all (a temporary file renamed).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace fsdpc {

struct TokenizeProgress {
  int64_t bytes_done = 0, bytes_total = 0, tokens = 0;
  double seconds = 0;
};

struct TokenizeOptions {
  std::vector<std::string> inputs;
  // train.bin (uint16 ids, nanoGPT's; the vocabulary must fit) or
  // train.u32 (uint32 ids).
  std::string out;
  // The last fraction of the tokens goes to the validation file beside
  // `out` (val_path_for), as nanoGPT's data[int(n*0.9):].
  double val_fraction = 0;
  int threads = 0;                    // 0: one per core
  std::optional<TokenId> separator;   // between documents; needed for two or more
  bool parse_special = false;         // special tokens written in the text read as such
  size_t piece_bytes = size_t{1} << 20;  // the text a thread encodes at a time, where it may be cut
  std::function<void(const TokenizeProgress&)> progress;  // about twice a second, from the calling thread
};

struct TokenizeResult {
  int64_t bytes = 0, tokens = 0, train_tokens = 0, val_tokens = 0;
  int width = 2;  // bytes per id
  std::string train_path, val_path;  // val_path "" without a val fraction
  double seconds = 0;
};

// Throws fsdpc::Error for an output name that is neither .bin nor .u32, a
// vocabulary a .bin cannot hold, an input that is missing, a folder or not
// UTF-8 (naming the file and the byte), or two documents and no separator.
TokenizeResult tokenize_files(const Tokenizer& tokenizer, const TokenizeOptions& options);

// The validation file beside `out`: "train" in its name becomes "val"
// (train.bin -> val.bin), else ".val" goes before the suffix.
std::string val_path_for(const std::string& out);

// The id width a token file named `out` takes (2 for .bin, 4 for .u32),
// checked against the vocabulary.
int token_file_width(const std::string& out, int64_t vocab_size);

}  // namespace fsdpc
