// Real training tokens in nanoGPT's format (train.bin: little-endian uint16
// ids; any other file: its bytes), memory-mapped so that a step reads only its
// own windows, with the same rank slicing as the synthetic data (runtime/data.h).
#pragma once

#include <cstdint>
#include <string>

namespace fsdpc {

enum class Sampling { sequential, random };

// A token file cut into training windows of seq + 1 tokens (inputs and the
// targets shifted by one). With len tokens the file holds
// W = floor((len - 1) / seq) sequential windows; window w starts at w * seq.
//
// Sequential sampling: step s, global row i reads window (s * B + i) mod W.
// Random sampling: step s, global row i starts at a uniform offset in
// [0, len - seq - 1], a pure function of (seed, s, i).
// Either way data-parallel rank r of N takes rows [r * B / N, (r + 1) * B / N),
// so the ranks' slices make up exactly the batch a world of one would see.
//
// Token ids are checked against the model's vocabulary as they are read (a
// scan of the whole file would read gigabytes up front).
class TokenData {
 public:
  // Throws fsdpc::Error for vocab < 1, seq < 1, a file that cannot be opened
  // or mapped, a .bin file with an odd byte count, or a file shorter than one
  // window (len < seq + 1).
  TokenData(const std::string& path, int64_t vocab, int64_t seq, Sampling sampling = Sampling::sequential,
            uint64_t seed = 0);
  ~TokenData();
  TokenData(TokenData&& other) noexcept;
  TokenData& operator=(TokenData&& other) noexcept;
  TokenData(const TokenData&) = delete;
  TokenData& operator=(const TokenData&) = delete;

  const std::string& path() const { return path_; }
  int64_t tokens() const { return tokens_; }
  int64_t windows() const { return (tokens_ - 1) / seq_; }
  int64_t seq() const { return seq_; }
  // The id range the file format can hold: 65536 for .bin, 256 for bytes.
  int64_t vocab_of_file() const { return wide_ ? 65536 : 256; }
  // Sequential steps that visit every window at least once: ceil(W / B).
  // A validation loss over a whole .bin file runs steps [0, this) of a
  // sequential TokenData on that file (the last step may wrap to window 0).
  int64_t steps_per_epoch(int64_t global_batch) const;

  // Fills idx and targets, both [global_batch / dp_world, seq] row-major, with
  // rank dp_rank's rows of step `step`. Throws fsdpc::Error for step < 0,
  // global_batch < 1, a rank outside [0, dp_world), global_batch not
  // divisible by dp_world, or a token id >= vocab in a window read.
  void batch(int64_t step, int64_t dp_rank, int64_t dp_world, int64_t global_batch, int64_t* idx,
             int64_t* targets) const;

 private:
  int64_t window_start(int64_t step, int64_t global_batch, int64_t row) const;
  int64_t token(int64_t offset) const;
  void release() noexcept;

  std::string path_;
  int64_t vocab_ = 0;
  int64_t seq_ = 0;
  Sampling sampling_ = Sampling::sequential;
  uint64_t seed_ = 0;
  bool wide_ = false;  // uint16 tokens (.bin) rather than bytes
  int64_t tokens_ = 0;
  const unsigned char* data_ = nullptr;  // the read-only mapping
  size_t bytes_ = 0;
};

}  // namespace fsdpc
