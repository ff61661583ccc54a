// Synthetic data: the data-parallel ranks' slices make up the world-of-one
// batch, targets are the inputs shifted by one, and the token rule is there
// to be learned.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "ir/error.h"
#include "runtime/data.h"

using namespace fsdpc;

namespace {
struct Batch {
  std::vector<int64_t> idx, targets;
};

Batch tokens(const SyntheticTokens& d, int64_t step, int64_t rank, int64_t world, int64_t b, int64_t t) {
  const size_t n = static_cast<size_t>(b * t);
  Batch out{std::vector<int64_t>(n, -1), std::vector<int64_t>(n, -1)};
  d.batch(step, rank, world, b, t, out.idx.data(), out.targets.data());
  return out;
}

std::vector<float> features(uint64_t seed, int64_t step, int64_t rank, int64_t world, int64_t b, int64_t f) {
  std::vector<float> x(static_cast<size_t>(b * f), -1.0f);
  synthetic_features(seed, step, rank, world, b, f, x.data());
  return x;
}
}  // namespace

TEST_CASE("the ranks' token slices make up the world-of-one batch", "[data]") {
  const SyntheticTokens d(1234, 50257);
  const int64_t global = 12, seq = 17;
  for (int64_t step : {0, 1, 1000}) {
    const Batch one = tokens(d, step, 0, 1, global, seq);
    for (int64_t world = 1; world <= 4; ++world) {
      CAPTURE(step, world);
      Batch all;
      for (int64_t r = 0; r < world; ++r) {
        Batch part = tokens(d, step, r, world, global / world, seq);
        all.idx.insert(all.idx.end(), part.idx.begin(), part.idx.end());
        all.targets.insert(all.targets.end(), part.targets.begin(), part.targets.end());
      }
      CHECK(all.idx == one.idx);
      CHECK(all.targets == one.targets);
    }
  }
}

TEST_CASE("targets are the inputs shifted by one, tokens within the vocabulary", "[data]") {
  const SyntheticTokens d(7, 65);
  const int64_t b = 8, seq = 32;
  const Batch x = tokens(d, 3, 1, 2, b, seq);
  for (int64_t i = 0; i < b; ++i)
    for (int64_t t = 0; t < seq; ++t) {
      const int64_t k = i * seq + t;
      CHECK(x.idx[k] >= 0);
      CHECK(x.idx[k] < 65);
      CHECK(x.targets[k] >= 0);
      CHECK(x.targets[k] < 65);
      if (t + 1 < seq) CHECK(x.targets[k] == x.idx[k + 1]);
    }
  // A longer sequence of the same row extends it: position t does not depend on seq.
  const Batch longer = tokens(d, 3, 1, 2, b, seq + 5);
  for (int64_t i = 0; i < b; ++i)
    for (int64_t t = 0; t < seq; ++t) CHECK(longer.idx[i * (seq + 5) + t] == x.idx[i * seq + t]);
}

TEST_CASE("different steps, seeds and rows give different data", "[data]") {
  const SyntheticTokens d(7, 50257), e(8, 50257);
  const Batch a = tokens(d, 0, 0, 1, 4, 64), b = tokens(d, 1, 0, 1, 4, 64), c = tokens(e, 0, 0, 1, 4, 64);
  CHECK(a.idx != b.idx);
  CHECK(a.idx != c.idx);
  // Rows of one batch are distinct sequences.
  std::set<std::vector<int64_t>> rows;
  for (int64_t i = 0; i < 4; ++i)
    rows.insert(std::vector<int64_t>(a.idx.begin() + i * 64, a.idx.begin() + (i + 1) * 64));
  CHECK(rows.size() == 4);
  CHECK(tokens(d, 0, 0, 1, 4, 64).idx == a.idx);  // and the same call repeats
}

TEST_CASE("tokens follow one of four affine rules, with about 1/16 noise", "[data]") {
  const int64_t vocab = 1000, b = 64, seq = 128;
  const SyntheticTokens d(99, vocab);
  const Batch x = tokens(d, 5, 0, 1, b, seq);
  int64_t noisy = 0;
  std::map<std::pair<int64_t, int64_t>, int64_t> rules_seen;
  for (int64_t i = 0; i < b; ++i) {
    // The rule of a row is the (a, b) that explains most of its transitions.
    std::pair<int64_t, int64_t> best;
    int64_t best_hits = -1;
    for (int64_t ra : {1, 3})
      for (int64_t rb : {1, 7}) {
        int64_t hits = 0;
        for (int64_t t = 0; t < seq; ++t) hits += x.targets[i * seq + t] == (ra * x.idx[i * seq + t] + rb) % vocab;
        if (hits > best_hits) best_hits = hits, best = {ra, rb};
      }
    CHECK(best_hits > seq * 3 / 4);
    noisy += seq - best_hits;
    ++rules_seen[best];
  }
  CHECK(rules_seen.size() == 4);
  // Noise at 1/16: 512 of 8192 transitions expected (a noise token can also
  // happen to equal the rule's, so slightly fewer are counted).
  CHECK(noisy > 400);
  CHECK(noisy < 620);
}

TEST_CASE("a bigram table of the rules predicts most targets", "[data]") {
  // What a model can learn from these tokens: given a token, the next one is
  // one of four values; a small vocabulary makes the table's counts dense.
  const int64_t vocab = 97, b = 32, seq = 64;
  const SyntheticTokens d(3, vocab);
  std::map<int64_t, std::map<int64_t, int64_t>> counts;
  for (int64_t step = 0; step < 20; ++step) {
    const Batch x = tokens(d, step, 0, 1, b, seq);
    for (size_t k = 0; k < x.idx.size(); ++k) ++counts[x.idx[k]][x.targets[k]];
  }
  // Held-out step: the four most frequent successors cover > 85% of targets.
  const Batch test = tokens(d, 1000, 0, 1, b, seq);
  int64_t covered = 0;
  for (size_t k = 0; k < test.idx.size(); ++k) {
    std::vector<std::pair<int64_t, int64_t>> succ;
    for (auto [next, n] : counts[test.idx[k]]) succ.emplace_back(n, next);
    std::sort(succ.rbegin(), succ.rend());
    for (size_t j = 0; j < std::min<size_t>(4, succ.size()); ++j) covered += succ[j].second == test.targets[k];
  }
  CHECK(static_cast<double>(covered) / static_cast<double>(test.idx.size()) > 0.85);
}

TEST_CASE("the ranks' feature slices make up the world-of-one batch", "[data]") {
  const int64_t global = 12, f = 65;  // odd width: Box–Muller pairs end mid-row
  for (int64_t step : {0, 9}) {
    const std::vector<float> one = features(5, step, 0, 1, global, f);
    for (int64_t world = 1; world <= 4; ++world) {
      std::vector<float> all;
      for (int64_t r = 0; r < world; ++r) {
        std::vector<float> part = features(5, step, r, world, global / world, f);
        all.insert(all.end(), part.begin(), part.end());
      }
      CHECK(all == one);
    }
  }
  CHECK(features(5, 0, 0, 1, global, f) != features(5, 1, 0, 1, global, f));
  CHECK(features(5, 0, 0, 1, global, f) != features(6, 0, 0, 1, global, f));
}

TEST_CASE("features are standard normal", "[data]") {
  const std::vector<float> x = features(1, 0, 0, 1, 1024, 64);
  double s = 0, s2 = 0;
  for (float v : x) s += v, s2 += static_cast<double>(v) * v;
  const double n = static_cast<double>(x.size()), mean = s / n;
  CHECK(std::abs(mean) < 5.0 / std::sqrt(n));
  CHECK(std::sqrt(s2 / n - mean * mean) == Approx(1.0).epsilon(0.02));
}

TEST_CASE("bad sizes are rejected", "[data]") {
  CHECK_THROWS_AS(SyntheticTokens(1, 0), Error);
  const SyntheticTokens d(1, 10);
  int64_t idx[4], targets[4];
  CHECK_THROWS_AS(d.batch(0, 2, 2, 1, 4, idx, targets), Error);
  CHECK_THROWS_AS(d.batch(0, 0, 1, 0, 4, idx, targets), Error);
  CHECK_THROWS_AS(d.batch(0, 0, 1, 1, 0, idx, targets), Error);
  float x[4];
  CHECK_THROWS_AS(synthetic_features(1, 0, -1, 2, 1, 4, x), Error);
  CHECK_THROWS_AS(synthetic_features(1, 0, 0, 1, 1, 0, x), Error);
}
