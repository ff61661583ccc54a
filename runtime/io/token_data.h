// Real training tokens, memory-mapped so that a step reads only its own
// windows, with the same rank slicing as the synthetic data (runtime/data.h).
//
// A token file is a flat array of little-endian unsigned ids and nothing else,
// as nanoGPT's prepare.py writes it (np.array(ids, dtype=np.uint16).tofile).
// Megatron's indexed .bin is such an array too (document boundaries and the
// dtype sit in its .idx): uint16 for small vocabularies, int32 above 65500,
// which for ids >= 0 is the same bytes as uint32. The element width is chosen,
// not guessed from the contents, because a uint32 file of small ids also
// reads as valid uint16 ids (each followed by a zero):
//   automatic  the suffix decides: .bin is uint16 (nanoGPT, vocabularies up
//              to 65536), .u32 is uint32, anything else is bytes (text);
//   uint8, uint16, uint32  whatever the suffix (`--data-dtype` of fsdpc
//              train), e.g. a nanoGPT-style train.bin of Llama 3 ids.
// uint32 is what a vocabulary above 65536 needs (Llama 3's 128256, Qwen2's
// 151936): np.array(ids, dtype=np.uint32).tofile("train.u32").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fsdpc {

enum class Sampling { sequential, random };
// "sequential", "random" (--sampling); nullopt for anything else.
std::optional<Sampling> parse_sampling(std::string_view name);

enum class TokenDtype { automatic, uint8, uint16, uint32 };

// "auto", "uint8", "uint16", "uint32"; nullopt for anything else.
std::optional<TokenDtype> parse_token_dtype(std::string_view name);
std::string_view token_dtype_name(TokenDtype dtype);
// The width a file is read with: `requested` unless automatic, else by suffix.
TokenDtype resolve_token_dtype(const std::string& path, TokenDtype requested);

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
  // or mapped, a byte count that is not a multiple of the id width, a file
  // shorter than one window (len < seq + 1), or a vocabulary the ids cannot
  // hold: vocab > 65536 with uint16 ids (a tokenizer that large wrote
  // wrapped ids into it, or it is a uint32 file), vocab > 256 with uint8
  // ids that were asked for. An automatic byte file serves any vocabulary:
  // text is text, whatever the model's tokenizer.
  TokenData(const std::string& path, int64_t vocab, int64_t seq, Sampling sampling = Sampling::sequential,
            uint64_t seed = 0, TokenDtype dtype = TokenDtype::automatic);
  ~TokenData();
  TokenData(TokenData&& other) noexcept;
  TokenData& operator=(TokenData&& other) noexcept;
  TokenData(const TokenData&) = delete;
  TokenData& operator=(const TokenData&) = delete;

  const std::string& path() const { return path_; }
  int64_t tokens() const { return tokens_; }
  int64_t windows() const { return (tokens_ - 1) / seq_; }
  int64_t seq() const { return seq_; }
  // Bytes per id: 1, 2 or 4.
  int width() const { return width_; }
  // The id range the file format can hold: 256, 65536 or 2^32.
  int64_t vocab_of_file() const { return int64_t{1} << (8 * width_); }
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
  int width_ = 1;  // bytes per id
  int64_t tokens_ = 0;
  const unsigned char* data_ = nullptr;  // the read-only mapping
  size_t bytes_ = 0;
};

}  // namespace fsdpc
