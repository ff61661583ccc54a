// A row's log-sum-exp statistics as cross_entropy (cross_entropy.cu) and the
// fused head (linear_cross_entropy.cu) accumulate them: the max m of the
// elements seen and the "rest" r = sum exp(x - m) over all of them but one
// max (whose own term is exactly 1), so logsumexp = m + log1p(r) keeps a
// confident right answer's small loss to f32 precision, where log(1 + r) in
// f32 would lose everything below 1e-7. Device code: .cu files only.
#pragma once

#include <cmath>

namespace fsdpc::cuda {

// Empty: m = -inf, r = 0. No member initializers: it lives in __shared__
// memory (block_reduce).
struct MaxRest {
  float m, r;
};

// Adds x. A new max turns the old one into an ordinary term (1 before
// rescaling; exp(-inf) = 0 drops the empty start's). -inf adds nothing; a
// NaN makes r NaN, poisoning the row as on the CPU.
__device__ __forceinline__ MaxRest push_max_rest(MaxRest a, float x) {
  if (x > a.m) {
    a.r = (a.r + 1.0f) * expf(a.m - x);
    a.m = x;
  } else if (x != -INFINITY) {
    a.r += expf(x - a.m);
  }
  return a;
}

// The merge for warp_reduce / block_reduce. Symmetric bit for bit, so
// both lanes of a shuffle pair, and in the end the whole row, hold the same
// result: the smaller max's partial joins the larger's (its own max
// becoming an ordinary term); equal maxes keep one.
struct MergeMaxRest {
  __device__ __forceinline__ MaxRest operator()(MaxRest a, MaxRest b) const {
    const float m = fmaxf(a.m, b.m);
    if (m == -INFINITY) return {m, a.r + b.r};
    if (a.m == b.m) return {m, (a.r + b.r) + 1.0f};
    const MaxRest& big = a.m > b.m ? a : b;
    const MaxRest& small = a.m > b.m ? b : a;
    return {m, big.r + (small.r + 1.0f) * expf(small.m - m)};
  }
};

}  // namespace fsdpc::cuda
