// Synthetic tokens and features, identical across world sizes (see runtime/data.h).
#include "runtime/data.h"

#include "ir/error.h"
#include "runtime/random.h"

namespace fsdpc {

namespace {
// Separate streams for tokens and features, so a run that uses both (or a
// future data kind) does not reuse one's numbers for the other.
constexpr uint64_t kTokenStream = 0x746f6b656e73ULL;    // "tokens"
constexpr uint64_t kFeatureStream = 0x6665617475ULL;     // "featu"

void check_slice(const char* what, int64_t dp_rank, int64_t dp_world, int64_t batch_local, int64_t width,
                 const char* width_name) {
  if (dp_world < 1 || dp_rank < 0 || dp_rank >= dp_world)
    fail(what, ": data-parallel rank ", dp_rank, " is outside a world of ", dp_world);
  if (batch_local < 1) fail(what, ": batch size per rank must be at least 1, got ", batch_local);
  if (width < 1) fail(what, ": ", width_name, " must be at least 1, got ", width);
}

uint64_t row_key(uint64_t seed, uint64_t stream, int64_t step, int64_t row) {
  return derive_key(derive_key(derive_key(seed, stream), static_cast<uint64_t>(step)), static_cast<uint64_t>(row));
}

int64_t uniform_token(uint64_t bits, int64_t vocab) {
  // Lemire's multiply-shift: bias below vocab / 2^64, no division.
  return static_cast<int64_t>((static_cast<unsigned __int128>(bits) * static_cast<uint64_t>(vocab)) >> 64);
}
}  // namespace

SyntheticTokens::SyntheticTokens(uint64_t seed, int64_t vocab) : seed_(seed), vocab_(vocab) {
  if (vocab < 1) fail("synthetic tokens: vocabulary size must be at least 1, got ", vocab);
}

void SyntheticTokens::batch(int64_t step, int64_t dp_rank, int64_t dp_world, int64_t batch_local, int64_t seq,
                            int64_t* idx, int64_t* targets) const {
  check_slice("synthetic tokens", dp_rank, dp_world, batch_local, seq, "sequence length");
  for (int64_t i = 0; i < batch_local; ++i)
    sequence(step, dp_rank * batch_local + i, seq, idx + i * seq, targets + i * seq);
}

// Counters of a row's stream: 0 the rule, 1 the start token, then 2 + 2t
// whether token t+1 is noise and 3 + 2t the noise token.
void SyntheticTokens::sequence(int64_t step, int64_t row, int64_t seq, int64_t* idx, int64_t* targets) const {
  static constexpr int64_t kA[2] = {1, 3}, kB[2] = {1, 7};
  const uint64_t key = row_key(seed_, kTokenStream, step, row);
  const uint64_t rule = random_bits(key, 0);
  const int64_t a = kA[rule & 1], b = kB[(rule >> 1) & 1];
  int64_t token = uniform_token(random_bits(key, 1), vocab_);
  for (int64_t t = 0; t < seq; ++t) {
    const uint64_t c = 2 + 2 * static_cast<uint64_t>(t);
    const bool noise = (random_bits(key, c) & 15) == 0;
    const int64_t next = noise ? uniform_token(random_bits(key, c + 1), vocab_) : (a * token + b) % vocab_;
    idx[t] = token;
    targets[t] = next;
    token = next;
  }
}

void synthetic_features(uint64_t seed, int64_t step, int64_t dp_rank, int64_t dp_world, int64_t batch_local,
                        int64_t features, float* x) {
  check_slice("synthetic features", dp_rank, dp_world, batch_local, features, "feature count");
  for (int64_t i = 0; i < batch_local; ++i) {
    const uint64_t key = row_key(seed, kFeatureStream, step, dp_rank * batch_local + i);
    fill_normal(key, 0, features, 1.0, x + i * features);
  }
}

}  // namespace fsdpc
