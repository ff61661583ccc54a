// Deterministic synthetic training data with DistributedSampler semantics:
// each data-parallel rank takes its contiguous slice of one global batch, and
// every value is a pure function of (seed, step, global row, position), so
// the ranks' slices make up exactly the batch a world of one would see.
#pragma once

#include <cstdint>

namespace fsdpc {

// Token sequences a small model can learn. Sequence r of step s draws one
// rule (a, b) from {1, 3} x {1, 7} and a uniform start token, then continues
//   token[t+1] = (a * token[t] + b) mod vocab
// except that with probability 1/16 a token is replaced by a uniform random
// one (the rule then continues from it). A bigram model can get the loss from
// log(vocab) to about log(4); attending to the previous pair recovers the
// rule and does better.
class SyntheticTokens {
 public:
  // Throws fsdpc::Error when vocab < 1.
  SyntheticTokens(uint64_t seed, int64_t vocab);

  // Fills idx and targets, both [batch_local, seq] row-major, for global
  // step `step`: rows [dp_rank * batch_local, (dp_rank + 1) * batch_local)
  // of the global batch of batch_local * dp_world sequences. Each row is a
  // generated sequence of seq + 1 tokens; idx holds tokens [0, seq) and
  // targets tokens [1, seq + 1). Throws fsdpc::Error for batch_local < 1,
  // seq < 1, or a rank outside [0, dp_world).
  void batch(int64_t step, int64_t dp_rank, int64_t dp_world, int64_t batch_local, int64_t seq, int64_t* idx,
             int64_t* targets) const;

  int64_t vocab() const { return vocab_; }

 private:
  void sequence(int64_t step, int64_t row, int64_t seq, int64_t* idx, int64_t* targets) const;

  uint64_t seed_;
  int64_t vocab_;
};

// Fills x [batch_local, features] row-major with normal(0, 1) values for the
// MLP's input: rows [dp_rank * batch_local, (dp_rank + 1) * batch_local) of
// step `step`'s global batch. Throws fsdpc::Error for the same bad sizes as
// SyntheticTokens::batch.
void synthetic_features(uint64_t seed, int64_t step, int64_t dp_rank, int64_t dp_world, int64_t batch_local,
                        int64_t features, float* x);

}  // namespace fsdpc
