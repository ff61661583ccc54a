// libFuzzer target: a token data file, as `fsdpc train --data FILE` reads it
// (TokenData, then a few steps' batches). The input's first byte picks what
// the command line would: the file kind (bits 0 and 7: raw bytes, .bin uint16
// ids, .u32 uint32 ids, or a .bin read as uint32 by --data-dtype), the
// sampling, the sequence length and the vocabulary; the rest is the file.
// fsdpc::Error is the clear exit-2 path; anything else escaping is a finding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ir/error.h"
#include "runtime/io/token_data.h"
#include "test/fuzz/fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t knobs = data[0];
  const int kind = (knobs & 1) | ((knobs >> 7) << 1);
  static constexpr const char* kNames[] = {"input.txt", "train.bin", "train.u32", "train.bin"};
  const fsdpc::TokenDtype dtype = kind == 3 ? fsdpc::TokenDtype::uint32 : fsdpc::TokenDtype::automatic;
  const auto sampling = knobs & 2 ? fsdpc::Sampling::random : fsdpc::Sampling::sequential;
  const int64_t seq = 1 + ((knobs >> 2) & 7);
  static constexpr int64_t kVocabs[] = {50257, 256, 65, 65536};
  const int64_t vocab = kVocabs[(knobs >> 5) & 3];
  const std::string path = fsdpc::fuzz::input_folder().write(kNames[kind], data + 1, size - 1);
  try {
    fsdpc::TokenData tokens(path, vocab, seq, sampling, /*seed=*/knobs, dtype);
    constexpr int64_t kBatch = 4, kWorld = 2;
    std::vector<int64_t> idx(kBatch / kWorld * seq), targets(idx.size());
    for (int64_t step = 0; step < 3; ++step)
      for (int64_t rank = 0; rank < kWorld; ++rank)
        tokens.batch(step, rank, kWorld, kBatch, idx.data(), targets.data());
    tokens.steps_per_epoch(kBatch);
  } catch (const fsdpc::Error&) {
  }
  return 0;
}
