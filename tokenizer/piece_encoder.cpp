// One mutex guards the slots and counters: a thread holds it only to take a
// piece number and to store a result, never while encoding (a piece is
// about 1 MiB of text, milliseconds of work).
#include "tokenizer/piece_encoder.h"

#include <stdexcept>

#include "ir/error.h"
#include "tokenizer/utf8.h"

namespace fsdpc {

PieceEncoder::PieceEncoder(const Tokenizer& tokenizer, std::vector<TextPiece> pieces, size_t threads,
                           bool parse_special)
    : tokenizer_(tokenizer),
      pieces_(std::move(pieces)),
      parse_special_(parse_special),
      window_(4 * threads),
      slots_(pieces_.size()) {
  for (size_t t = 0; t < threads; ++t) threads_.emplace_back([this] { work(); });
}

PieceEncoder::~PieceEncoder() {
  stop();
  for (std::thread& t : threads_) t.join();
}

void PieceEncoder::stop() {
  std::lock_guard lock(mutex_);
  stopping_ = true;
  changed_.notify_all();
}

void PieceEncoder::work() {
  try {
    for (;;) {
      size_t i = 0;
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || next_piece_ >= pieces_.size() || next_piece_ < taken_ + window_; });
        if (stopping_ || next_piece_ >= pieces_.size()) return;
        i = next_piece_++;
      }
      const TextPiece& p = pieces_[i];
      if (std::optional<size_t> bad = utf8::first_invalid(p.text))
        fail(*p.file, ": not UTF-8 text at byte ", p.offset + *bad);
      std::vector<TokenId> ids;
      ids.reserve(p.text.size() / 3);
      tokenizer_.encode_into(p.text, ids, parse_special_);
      std::lock_guard lock(mutex_);
      slots_[i] = std::move(ids);
      changed_.notify_all();
    }
  } catch (...) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::current_exception();
    stopping_ = true;
    changed_.notify_all();
  }
}

std::optional<std::vector<TokenId>> PieceEncoder::next(std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex_);
  if (taken_ >= pieces_.size()) throw std::logic_error("PieceEncoder::next() past the last piece");
  changed_.wait_for(lock, wait, [&] { return error_ || slots_[taken_].has_value(); });
  if (error_) std::rethrow_exception(error_);
  if (!slots_[taken_]) return std::nullopt;
  std::optional<std::vector<TokenId>> ids = std::move(slots_[taken_]);
  slots_[taken_].reset();
  ++taken_;
  changed_.notify_all();
  return ids;
}

}  // namespace fsdpc
