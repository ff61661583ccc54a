// Shard-local parameter initialisation: shards concatenate to the unsharded
// parameter for any world size, the distributions are right, and values
// depend on seed and parameter path only.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "passes/fsdp.h"
#include "runtime/init.h"
#include "runtime/random.h"

using namespace fsdpc;

namespace {
int64_t row_size(const Shape& s) {
  int64_t n = 1;
  for (size_t i = 1; i < s.size(); ++i) n *= s[i];
  return n;
}

std::vector<float> full_init(const Shape& shape, const ParamInit& init, uint64_t seed, std::string_view path) {
  int64_t d0 = shape.empty() ? 1 : shape[0];
  std::vector<float> out(static_cast<size_t>(d0 * row_size(shape)), -1.0f);
  init_shard(out.data(), shape, 0, d0, init, seed, path);
  return out;
}

double mean(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return s / static_cast<double>(v.size());
}

double stddev(const std::vector<float>& v) {
  double m = mean(v), s = 0;
  for (float x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}
}  // namespace

TEST_CASE("shards concatenate to the unsharded init for any world size", "[init]") {
  const ParamInit normal{ParamInit::Kind::normal, 0.02};
  const ParamInit uniform{ParamInit::Kind::uniform, 0.5};
  // Odd row sizes put Box–Muller pairs across row and shard boundaries.
  for (const Shape& shape : {Shape{7, 3}, Shape{10, 5}, Shape{3}, Shape{13}, Shape{2, 3, 3}, Shape{}}) {
    for (const ParamInit& init : {normal, uniform}) {
      const std::vector<float> full = full_init(shape, init, 42, "h.0.attn.c_attn.weight");
      const int64_t d0 = shape.empty() ? 1 : shape[0], rs = row_size(shape);
      for (int64_t world = 1; world <= 5; ++world) {
        CAPTURE(shape_str(shape), world, static_cast<int>(init.kind));
        const int64_t rows = shard_rows(d0, world);
        std::vector<float> concat;
        for (int64_t rank = 0; rank < world; ++rank) {
          std::vector<float> shard(static_cast<size_t>(rows * rs), -1.0f);
          init_shard(shard.data(), shape, rank * rows, rows, init, 42, "h.0.attn.c_attn.weight");
          concat.insert(concat.end(), shard.begin(), shard.end());
        }
        REQUIRE(concat.size() == static_cast<size_t>(rows * world * rs));
        // The real rows match bit for bit, the padding is zero.
        CHECK(std::vector<float>(concat.begin(), concat.begin() + d0 * rs) == full);
        for (size_t i = static_cast<size_t>(d0 * rs); i < concat.size(); ++i) CHECK(concat[i] == 0.0f);
      }
    }
  }
}

TEST_CASE("tensor-parallel parts hold the full init's values where the split puts them", "[init][tp]") {
  const ParamInit normal{ParamInit::Kind::normal, 0.02};
  struct Split {
    Shape shape;
    int64_t dim, blocks;
  };
  // GPT-2's c_attn weight [in, 3 * out] (dim 1, 3 blocks) and bias, a
  // row-parallel weight (dim 0), a 3-D tensor split in the middle; odd
  // sizes put Box-Muller pairs across every boundary.
  for (const Split& sp : {Split{{5, 12}, 1, 3}, Split{{12}, 0, 3}, Split{{6, 7}, 0, 1}, Split{{3, 4, 5}, 1, 2},
                          Split{{4, 6}, 1, 1}}) {
    const std::vector<float> full = full_init(sp.shape, normal, 7, "h.0.attn.c_attn.weight");
    for (int tp : {1, 2}) {
      if (sp.shape[sp.dim] % (sp.blocks * tp) != 0) continue;
      Shape local = sp.shape;
      local[sp.dim] /= tp;
      const int64_t chunk = local[sp.dim] / sp.blocks;
      int64_t outer = 1, inner = 1;
      for (int64_t i = 0; i < sp.dim; ++i) outer *= sp.shape[i];
      for (size_t i = sp.dim + 1; i < sp.shape.size(); ++i) inner *= sp.shape[i];
      for (int t = 0; t < tp; ++t)
        for (int64_t world = 1; world <= 3; ++world) {  // FSDP rows of the part, the last padded
          CAPTURE(shape_str(sp.shape), sp.dim, sp.blocks, tp, t, world);
          const int64_t rows = shard_rows(local[0], world), rs = row_size(local);
          std::vector<float> part;
          for (int64_t rank = 0; rank < world; ++rank) {
            std::vector<float> shard(static_cast<size_t>(rows * rs), -1.0f);
            init_tp_shard(shard.data(), sp.shape, TensorParallelSplit{"h.0.attn.c_attn.weight", sp.dim, sp.blocks}, tp,
                          t, rank * rows, rows, normal, 7);
            part.insert(part.end(), shard.begin(), shard.end());
          }
          for (size_t i = static_cast<size_t>(local[0] * rs); i < part.size(); ++i) CHECK(part[i] == 0.0f);
          // Element (o, c, k) of the part is element (o, block-mapped c, k) of the full tensor.
          for (int64_t o = 0; o < outer; ++o)
            for (int64_t c = 0; c < local[sp.dim]; ++c)
              for (int64_t k = 0; k < inner; ++k) {
                const int64_t fc = (c / chunk * tp + t) * chunk + c % chunk;
                CHECK(part[static_cast<size_t>((o * local[sp.dim] + c) * inner + k)] ==
                      full[static_cast<size_t>((o * sp.shape[sp.dim] + fc) * inner + k)]);
              }
        }
    }
  }
}

// A padded vocabulary (passes/tensor_parallel.h): part t holds the full
// rows [t * ceil(V / T), V) it covers, bit for bit as one process
// initialises them, then padding rows of 0; put back together, the real rows
// are the one-process init.
TEST_CASE("a padded vocabulary's tp parts hold the full init's rows, then zeros", "[init][tp]") {
  const ParamInit normal{ParamInit::Kind::normal, 0.02};
  const int64_t cols = 7;  // odd: Box-Muller pairs straddle rows
  for (int64_t vocab : {101, 5}) {
    const Shape shape{vocab, cols};
    const std::vector<float> full = full_init(shape, normal, 7, "wte.weight");
    for (int tp : {2, 3, 4}) {
      if (vocab % tp == 0) continue;
      const TensorParallelSplit split{"wte.weight", 0, 1, true};
      const int64_t part_rows = (vocab + tp - 1) / tp;  // 101: 51, 34, 26; 5: 3, 2, 2
      REQUIRE(tensor_parallel_part_shape(split, shape, tp) == Shape{part_rows, cols});
      std::vector<float> rebuilt;
      for (int t = 0; t < tp; ++t)
        for (int64_t world = 1; world <= 3; ++world) {  // FSDP rows of the part, the last padded
          CAPTURE(vocab, tp, t, world);
          const int64_t rows = shard_rows(part_rows, world);
          std::vector<float> part;
          for (int64_t rank = 0; rank < world; ++rank) {
            std::vector<float> shard(static_cast<size_t>(rows * cols), -1.0f);
            init_tp_shard(shard.data(), shape, split, tp, t, rank * rows, rows, normal, 7);
            part.insert(part.end(), shard.begin(), shard.end());
          }
          const int64_t real = std::clamp<int64_t>(vocab - t * part_rows, 0, part_rows);
          const auto at = full.begin() + t * part_rows * cols;
          CHECK(std::vector<float>(part.begin(), part.begin() + real * cols) == std::vector<float>(at, at + real * cols));
          int64_t nonzero = 0;  // vocabulary padding, then FSDP padding
          for (size_t i = static_cast<size_t>(real * cols); i < part.size(); ++i) nonzero += part[i] != 0.0f;
          CHECK(nonzero == 0);
          if (world == 1) rebuilt.insert(rebuilt.end(), part.begin(), part.begin() + real * cols);
        }
      CHECK(rebuilt == full);
    }
  }
}

TEST_CASE("a shard made only of padding rows is all zeros", "[init]") {
  // 3 rows on 4 ranks: ceil(3/4) = 1, so rank 3 holds row 3, which is padding.
  std::vector<float> shard(4, -1.0f);
  init_shard(shard.data(), {3, 4}, 3, 1, {ParamInit::Kind::ones, 0.0}, 1, "w");
  CHECK(shard == std::vector<float>(4, 0.0f));
}

TEST_CASE("normal init has the requested mean and std", "[init]") {
  for (double std : {0.02, 0.02 / std::sqrt(24.0), 1.0}) {
    const std::vector<float> v = full_init({512, 512}, {ParamInit::Kind::normal, std}, 7, "wte.weight");
    CAPTURE(std);
    // 262144 samples: the sample mean's std is std / 512.
    CHECK(std::abs(mean(v)) < 5 * std / 512);
    CHECK(stddev(v) == Approx(std).epsilon(0.01));
    // A normal puts 68.3% of its mass within one std.
    int64_t within = 0;
    for (float x : v) within += std::abs(x) < std;
    CHECK(static_cast<double>(within) / static_cast<double>(v.size()) == Approx(0.6827).margin(0.005));
  }
}

TEST_CASE("uniform init stays within its bound and fills it", "[init]") {
  const double bound = 1.0 / std::sqrt(64.0);
  const std::vector<float> v = full_init({256, 256}, {ParamInit::Kind::uniform, bound}, 3, "0.weight");
  float lo = 1, hi = -1;
  for (float x : v) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  CHECK(lo >= -bound);
  CHECK(hi <= bound);
  CHECK(lo < -0.99 * bound);
  CHECK(hi > 0.99 * bound);
  CHECK(std::abs(mean(v)) < 0.01 * bound);
  CHECK(stddev(v) == Approx(bound / std::sqrt(3.0)).epsilon(0.01));
}

TEST_CASE("zeros and ones ignore the seed", "[init]") {
  CHECK(full_init({5, 3}, {ParamInit::Kind::zeros, 0.0}, 1, "ln_f.bias") == std::vector<float>(15, 0.0f));
  CHECK(full_init({5, 3}, {ParamInit::Kind::ones, 0.0}, 9, "ln_f.weight") == std::vector<float>(15, 1.0f));
  CHECK(full_init({}, {ParamInit::Kind::ones, 0.0}, 9, "scale") == std::vector<float>{1.0f});
}

TEST_CASE("init is deterministic and depends on seed and path", "[init]") {
  const ParamInit init{ParamInit::Kind::normal, 0.02};
  const std::vector<float> a = full_init({16, 8}, init, 5, "h.0.mlp.c_fc.weight");
  CHECK(full_init({16, 8}, init, 5, "h.0.mlp.c_fc.weight") == a);
  const std::vector<float> other_path = full_init({16, 8}, init, 5, "h.1.mlp.c_fc.weight");
  const std::vector<float> other_seed = full_init({16, 8}, init, 6, "h.0.mlp.c_fc.weight");
  int64_t same_path = 0, same_seed = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    same_path += a[i] == other_path[i];
    same_seed += a[i] == other_seed[i];
  }
  CHECK(same_path == 0);
  CHECK(same_seed == 0);
}

TEST_CASE("the value at an index does not depend on the shape around it", "[init]") {
  // The counter is the global element index: a [4, 6] and a [6, 4]
  // parameter of the same path hold the same 24 numbers.
  const ParamInit init{ParamInit::Kind::normal, 1.0};
  CHECK(full_init({4, 6}, init, 11, "w") == full_init({6, 4}, init, 11, "w"));
}

// fill_normal may compute with glibc's vector log/cos/sin (4 ulp) where the
// CPU has AVX2: against Box–Muller written out with the scalar functions
// (1 ulp), every f32 value is equal or one ulp away, and almost all equal.
TEST_CASE("fill_normal matches scalar Box-Muller to one f32 ulp", "[init][random]") {
  const int64_t n = 1 << 21;
  std::vector<float> got(static_cast<size_t>(n));
  fill_normal(77, 0, n, 0.02, got.data());
  int64_t differ = 0;
  for (int64_t k = 0; k < n / 2; ++k) {
    const uint64_t c = 2 * static_cast<uint64_t>(k);
    const double u1 = static_cast<double>((random_bits(77, c) >> 11) + 1) * 0x1.0p-53;
    const double u2 = uniform01(random_bits(77, c + 1));
    const double radius = std::sqrt(-2.0 * std::log(u1)), angle = 2.0 * std::numbers::pi * u2;
    const float want[2] = {static_cast<float>(0.02 * radius * std::cos(angle)),
                           static_cast<float>(0.02 * radius * std::sin(angle))};
    for (int h = 0; h < 2; ++h) {
      const float v = got[static_cast<size_t>(2 * k + h)];
      if (v == want[h]) continue;
      ++differ;
      INFO("position " << 2 * k + h << ": " << v << " against " << want[h]);
      CHECK((v == std::nextafter(want[h], 1.0f) || v == std::nextafter(want[h], -1.0f)));
    }
  }
  CHECK(differ <= n / 100000);
}

TEST_CASE("fill_normal gives the same value at a position from any slice start", "[init][random]") {
  std::vector<float> whole(9);
  fill_normal(123, 0, 9, 1.0, whole.data());
  for (int64_t begin = 0; begin < 9; ++begin) {
    std::vector<float> part(static_cast<size_t>(9 - begin));
    fill_normal(123, begin, 9, 1.0, part.data());
    CHECK(part == std::vector<float>(whole.begin() + begin, whole.end()));
  }
  CHECK(hash_string("a.weight") != hash_string("a.weighu"));
}
