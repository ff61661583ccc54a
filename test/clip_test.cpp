// Global-norm gradient clipping over shards: simulated ranks, whose local sums
// are added by the callback, clip exactly as one unsharded rank does.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ir/error.h"
#include "runtime/clip.h"

using namespace fsdpc;

namespace {
using Grads = std::vector<std::vector<float>>;

std::vector<std::pair<float*, int64_t>> views(Grads& g) {
  std::vector<std::pair<float*, int64_t>> out;
  for (auto& v : g) out.emplace_back(v.data(), static_cast<int64_t>(v.size()));
  return out;
}

// Two parameters' gradients; `exact` values are multiples of 1/64 below 4,
// whose squares and every partial sum are exact in double, so the norm does
// not depend on summation order.
Grads make_grads(bool exact) {
  Grads g{std::vector<float>(23), std::vector<float>(50)};
  int k = 0;
  for (auto& v : g)
    for (float& x : v) {
      ++k;
      x = exact ? static_cast<float>((k * 37 % 511) - 255) / 64.0f : static_cast<float>(std::sin(k * 1.7) * 3.0);
    }
  return g;
}

// Rank r of `world` holds elements [r * rows, (r + 1) * rows) of every
// gradient. The callback runs once per rank with its local sum; the "all
// reduce" is simulated by computing every rank's local sum first.
double clip_sharded(Grads& g, int64_t world, double max_norm) {
  std::vector<size_t> rows;
  for (auto& v : g) rows.push_back((v.size() + world - 1) / world);
  auto shard = [&](int64_t r) {
    std::vector<std::pair<float*, int64_t>> out;
    for (size_t p = 0; p < g.size(); ++p) {
      size_t b = std::min(g[p].size(), r * rows[p]), e = std::min(g[p].size(), b + rows[p]);
      out.emplace_back(g[p].data() + b, static_cast<int64_t>(e - b));
    }
    return out;
  };
  std::vector<double> local(static_cast<size_t>(world));
  for (int64_t r = 0; r < world; ++r)  // measuring pass: record, do not scale
    clip_grad_norm(cpu_backend(), shard(r), {}, 1e300, [&](double s) { return local[r] = s, s; });
  double norm = -1;
  for (int64_t r = 0; r < world; ++r) {
    double n = clip_grad_norm(cpu_backend(), shard(r), {}, max_norm, [&](double) {
      double sum = 0;
      for (double s : local) sum += s;
      return sum;
    });
    if (r > 0) CHECK(n == norm);  // every rank sees the same norm
    norm = n;
  }
  return norm;
}

double norm_of(const Grads& g) {
  double s = 0;
  for (auto& v : g)
    for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}
}  // namespace

TEST_CASE("sharded clipping equals unsharded clipping exactly", "[clip]") {
  const Grads original = make_grads(true);
  Grads whole = original;
  const double norm = clip_grad_norm(cpu_backend(), views(whole), {}, 1.0, {});
  CHECK(norm == norm_of(original));
  CHECK(norm > 1.0);
  for (int64_t world = 1; world <= 5; ++world) {
    CAPTURE(world);
    Grads g = original;
    CHECK(clip_sharded(g, world, 1.0) == norm);
    CHECK(g == whole);
  }
}

TEST_CASE("sharded clipping of arbitrary gradients agrees to rounding", "[clip]") {
  const Grads original = make_grads(false);
  Grads whole = original;
  const double norm = clip_grad_norm(cpu_backend(), views(whole), {}, 0.5, {});
  CHECK(norm_of(whole) == Approx(0.5).epsilon(1e-5));  // clipped to max_norm (less 1e-6)
  for (int64_t world = 2; world <= 4; ++world) {
    Grads g = original;
    CHECK(clip_sharded(g, world, 0.5) == Approx(norm).epsilon(1e-14));
    for (size_t p = 0; p < g.size(); ++p)
      for (size_t i = 0; i < g[p].size(); ++i) CHECK(g[p][i] == Approx(whole[p][i]).epsilon(1e-6));
  }
}

TEST_CASE("torch's coefficient: max_norm / (norm + 1e-6)", "[clip]") {
  Grads g{{3.0f, 4.0f}};  // norm 5
  CHECK(clip_grad_norm(cpu_backend(), views(g), {}, 2.0, {}) == 5.0);
  const float c = static_cast<float>(2.0 / (5.0 + 1e-6));
  CHECK(g[0][0] == 3.0f * c);
  CHECK(g[0][1] == 4.0f * c);
}

TEST_CASE("no scaling below the threshold", "[clip]") {
  Grads g{{3.0f, 4.0f}, {0.0f}};
  const Grads before = g;
  CHECK(clip_grad_norm(cpu_backend(), views(g), {}, 5.0 + 2e-6, {}) == 5.0);
  CHECK(g == before);
  CHECK(clip_grad_norm(cpu_backend(), views(g), {}, 100.0, [](double s) { return s; }) == 5.0);
  CHECK(g == before);
}

TEST_CASE("the callback's global sum decides the norm", "[clip]") {
  // This rank's gradients are small, but other ranks contribute 99 to the
  // sum of squares: the global norm 10 clips them.
  Grads g{{0.0f, 1.0f}};
  CHECK(clip_grad_norm(cpu_backend(), views(g), {}, 1.0, [](double s) { return s + 99.0; }) == 10.0);
  CHECK(g[0][1] == static_cast<float>(1.0 / (10.0 + 1e-6)));
}

TEST_CASE("zero and empty gradients", "[clip]") {
  Grads g{{0.0f, 0.0f, 0.0f}, {}};
  CHECK(clip_grad_norm(cpu_backend(), views(g), {}, 1.0, {}) == 0.0);
  CHECK(g == Grads{{0.0f, 0.0f, 0.0f}, {}});
  CHECK(clip_grad_norm(cpu_backend(), {}, {}, 1.0, {}) == 0.0);
}

TEST_CASE("max_norm must be positive", "[clip]") {
  Grads g{{1.0f}};
  CHECK_THROWS_AS(clip_grad_norm(cpu_backend(), views(g), {}, 0.0, {}), Error);
  CHECK_THROWS_AS(clip_grad_norm(cpu_backend(), views(g), {}, -1.0, {}), Error);
  CHECK_THROWS_AS(clip_grad_norm(cpu_backend(), views(g), {}, std::nan(""), {}), Error);
}

TEST_CASE("a non-finite norm is returned and poisons the gradients, as in torch", "[clip]") {
  Grads g{{1.0f, std::nanf("")}};
  CHECK(std::isnan(clip_grad_norm(cpu_backend(), views(g), {}, 1.0, {})));
  CHECK(std::isnan(g[0][0]));
}

TEST_CASE("replicated gradients count once and are scaled with the shards", "[clip]") {
  std::vector<float> shard{3.0f}, replica{4.0f};
  int calls = 0;
  const double norm = clip_grad_norm(cpu_backend(), {{shard.data(), 1}}, {{replica.data(), 1}}, 1.0,
                                     [&](double local) {
                                       ++calls;
                                       CHECK(local == 9.0);  // only the shard's squares cross ranks
                                       return local;
                                     });
  CHECK(calls == 1);
  CHECK(norm == 5.0);
  const float c = static_cast<float>(1.0 / (5.0 + 1e-6));
  CHECK(shard[0] == 3.0f * c);
  CHECK(replica[0] == 4.0f * c);
}
