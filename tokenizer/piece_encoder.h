// Private to tokenize_files.cpp: threads that encode pieces of text at once
// and hand their ids back in order, at most a window of pieces ahead of the
// reader, which bounds memory whatever the input's size.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace fsdpc {

struct TextPiece {
  std::string_view text;
  const std::string* file;  // for messages: the file and the piece's offset in it
  size_t offset;
};

class PieceEncoder {
 public:
  // Starts `threads` threads. Each piece is checked as UTF-8 (an invalid
  // one is an fsdpc::Error naming the file and byte) and encoded.
  PieceEncoder(const Tokenizer& tokenizer, std::vector<TextPiece> pieces, size_t threads, bool parse_special);
  // Stops the threads (after their current piece) and joins them.
  ~PieceEncoder();
  PieceEncoder(const PieceEncoder&) = delete;
  PieceEncoder& operator=(const PieceEncoder&) = delete;

  size_t size() const { return pieces_.size(); }
  // The ids of the next piece in order once they are ready, or nullopt if
  // they are not within `wait`. Rethrows the first error a thread hit.
  std::optional<std::vector<TokenId>> next(std::chrono::milliseconds wait);

 private:
  void work();
  void stop();

  const Tokenizer& tokenizer_;
  std::vector<TextPiece> pieces_;
  bool parse_special_;
  size_t window_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::optional<std::vector<TokenId>>> slots_;  // guarded by mutex_
  size_t taken_ = 0;       // pieces handed back by next(); guarded by mutex_
  size_t next_piece_ = 0;  // the next piece a thread takes; guarded by mutex_
  bool stopping_ = false;  // guarded by mutex_
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
};

}  // namespace fsdpc
