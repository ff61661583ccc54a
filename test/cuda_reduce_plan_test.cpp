// The host-side plan of GPU sum/amax (executors/cuda/reduce_plan.h):
// layouts, dim coalescing, chunking and errors; then, without a GPU, each
// plan run through a host emulation of the launch functions as
// kernels/reduce.h documents them (and cuda_reduce.cpp chains them),
// checked against a direct reduction over many shapes and dims.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "executors/cuda/reduce_plan.h"
#include "ir/error.h"

using namespace fsdpc;
using namespace fsdpc::cuda;
using Catch::Contains;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

ReducePlan plan(std::vector<int64_t> shape, std::vector<int64_t> dims) { return plan_reduce(shape, dims, "cuda_sum"); }

double identity(ReduceOp op) { return op == ReduceOp::sum ? 0.0 : -kInf; }
double fold(ReduceOp op, double a, double v) {
  if (op == ReduceOp::sum) return a + v;
  return (v > a || v != v) ? v : a;
}

int64_t numel(const StridedDims& d) {
  int64_t n = 1;
  for (int i = 0; i < d.rank; ++i) n *= d.size[i];
  return n;
}

// ---- the launch functions, as reduce.h documents them ----

void emu_rows(ReduceOp op, const std::vector<double>& x, std::vector<double>& y, int64_t rows, int64_t cols,
              int64_t chunk, const StridedDims* kept = nullptr, const StridedDims* red = nullptr) {
  const int64_t chunks = (cols + chunk - 1) / chunk;
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t c = 0; c < chunks; ++c) {
      double acc = identity(op);
      for (int64_t j = c * chunk; j < std::min(cols, (c + 1) * chunk); ++j) {
        const int64_t at = kept ? strided_offset(*kept, row) + strided_offset(*red, j) : row * cols + j;
        acc = fold(op, acc, x.at(at));
      }
      y.at(row * chunks + c) = acc;
    }
}

void emu_columns(ReduceOp op, const std::vector<double>& x, std::vector<double>& y, int64_t outer, int64_t reduced,
                 int64_t inner, int64_t chunk) {
  const int64_t chunks = (reduced + chunk - 1) / chunk;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < chunks; ++c)
      for (int64_t i = 0; i < inner; ++i) {
        double acc = identity(op);
        for (int64_t r = c * chunk; r < std::min(reduced, (c + 1) * chunk); ++r)
          acc = fold(op, acc, x.at((o * reduced + r) * inner + i));
        y.at((o * chunks + c) * inner + i) = acc;
      }
}

void emu_threads(ReduceOp op, const std::vector<double>& x, std::vector<double>& y, int64_t outer, int64_t reduced,
                 int64_t inner) {
  for (int64_t k = 0; k < outer * inner; ++k) {
    const int64_t o = k / inner, i = k % inner;
    double acc = identity(op);
    for (int64_t r = 0; r < reduced; ++r) acc = fold(op, acc, x.at((o * reduced + r) * inner + i));
    y.at(k) = acc;
  }
}

void first_pass(const ReducePlan& p, ReduceOp op, const std::vector<double>& x, std::vector<double>& y) {
  switch (p.layout) {
    case ReduceLayout::threads: return emu_threads(op, x, y, p.outer, p.reduced, p.inner);
    case ReduceLayout::rows: return emu_rows(op, x, y, p.outer, p.reduced, p.chunk);
    case ReduceLayout::columns: return emu_columns(op, x, y, p.outer, p.reduced, p.inner, p.chunk);
    case ReduceLayout::strided:
      REQUIRE(numel(p.kept) == p.outer);
      REQUIRE(numel(p.reduced_dims) == p.reduced);
      return emu_rows(op, x, y, p.outer, p.reduced, p.chunk, &p.kept, &p.reduced_dims);
    case ReduceLayout::none: return;
  }
}

// What cuda_reduce.cpp enqueues for a plan.
std::vector<double> run_plan(const ReducePlan& p, ReduceOp op, const std::vector<double>& x) {
  if (p.layout == ReduceLayout::none) return {};
  std::vector<double> y(p.outer * p.inner, kNaN);
  const int64_t chunks = p.chunks();
  if (chunks == 1) {
    first_pass(p, op, x, y);
    return y;
  }
  std::vector<double> partials(p.partials(), kNaN);
  first_pass(p, op, x, partials);
  if (p.inner == 1)
    emu_rows(op, partials, y, p.outer, chunks, chunks);
  else
    emu_columns(op, partials, y, p.outer, chunks, p.inner, chunks);
  return y;
}

// The reduction computed directly from its definition.
std::vector<double> direct(ReduceOp op, const std::vector<double>& x, const std::vector<int64_t>& shape,
                           const std::vector<int64_t>& dims) {
  std::vector<bool> reduced(shape.size(), false);
  for (int64_t d : dims) reduced[d] = true;
  int64_t n_out = 1;
  for (size_t i = 0; i < shape.size(); ++i)
    if (!reduced[i]) n_out *= shape[i];
  std::vector<double> y(n_out, identity(op));
  std::vector<int64_t> index(shape.size(), 0);
  for (size_t flat = 0; flat < x.size(); ++flat) {
    int64_t o = 0;
    for (size_t i = 0; i < shape.size(); ++i)
      if (!reduced[i]) o = o * shape[i] + index[i];
    y[o] = fold(op, y[o], x[flat]);
    for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0 && ++index[i] == shape[i]; --i) index[i] = 0;
  }
  return y;
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// Runs both ops over x of `shape` (small integers, exact in f64, a few NaN
// for amax) and checks the plan's result against the direct one.
void check_against_direct(std::mt19937& rng, const std::vector<int64_t>& shape, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::uniform_int_distribution<int> value(-50, 50);
  std::vector<double> x(n);
  for (double& v : x) v = value(rng);
  const ReducePlan p = plan(shape, dims);
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::amax}) {
    std::vector<double> input = x;
    if (op == ReduceOp::amax && n > 3) input[n / 3] = kNaN;
    const std::vector<double> want = direct(op, input, shape, dims);
    const std::vector<double> got = run_plan(p, op, input);
    INFO("shape " << Catch::Detail::stringify(shape) << " dims " << Catch::Detail::stringify(dims) << " layout "
                  << static_cast<int>(p.layout) << " chunk " << p.chunk << " op " << static_cast<int>(op));
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("output " << i << ": got " << got[i] << ", want " << want[i]);
      REQUIRE(same(got[i], want[i]));
    }
  }
}

}  // namespace

TEST_CASE("a reduction over the innermost dims is rows", "[cuda_reduce_plan]") {
  const ReducePlan p = plan({4, 10, 100}, {1, 2});
  CHECK(p.layout == ReduceLayout::rows);
  CHECK(p.outer == 4);
  CHECK(p.reduced == 1000);
  CHECK(p.inner == 1);
  CHECK(p.chunks() == 1);
  CHECK(p.partials() == 0);
}

TEST_CASE("a reduction followed by kept dims is columns", "[cuda_reduce_plan]") {
  const ReducePlan bias = plan({64, 768}, {0});  // a bias gradient
  CHECK(bias.layout == ReduceLayout::columns);
  CHECK(bias.outer == 1);
  CHECK(bias.reduced == 64);
  CHECK(bias.inner == 768);
  const ReducePlan middle = plan({2, 3, 40, 5}, {1, 2});
  CHECK(middle.layout == ReduceLayout::columns);
  CHECK(middle.outer == 2);
  CHECK(middle.reduced == 120);
  CHECK(middle.inner == 5);
}

TEST_CASE("size-1 dims are dropped before coalescing", "[cuda_reduce_plan]") {
  // dims 1 and 3 are separated only by a size-1 kept dim: one run of 35.
  const ReducePlan p = plan({6, 5, 1, 7}, {1, 3});
  CHECK(p.layout == ReduceLayout::rows);
  CHECK(p.outer == 6);
  CHECK(p.reduced == 35);
  // Reducing a size-1 dim only is a copy, one thread per element.
  const ReducePlan copy = plan({3, 1, 4}, {1});
  CHECK(copy.layout == ReduceLayout::threads);
  CHECK(copy.outer * copy.inner == 12);
  CHECK(copy.reduced == 1);
}

TEST_CASE("short reductions run one thread per output", "[cuda_reduce_plan]") {
  const ReducePlan p = plan({4, 1000}, {0});  // 4 elements per output, strided by 1000
  CHECK(p.layout == ReduceLayout::threads);
  CHECK(p.outer == 1);
  CHECK(p.reduced == 4);
  CHECK(p.inner == 1000);
  const ReducePlan none = plan({5, 6}, {});
  CHECK(none.layout == ReduceLayout::threads);
  CHECK(none.outer == 30);
  CHECK(none.reduced == 1);
  const ReducePlan scalar = plan({}, {});
  CHECK(scalar.layout == ReduceLayout::threads);
  CHECK(scalar.outer * scalar.inner == 1);
}

TEST_CASE("empty outputs launch nothing; empty reductions give the identity", "[cuda_reduce_plan]") {
  CHECK(plan({0, 5}, {1}).layout == ReduceLayout::none);
  CHECK(plan({3, 0, 4}, {0}).layout == ReduceLayout::none);
  const ReducePlan empty = plan({5, 0}, {1});
  CHECK(empty.layout == ReduceLayout::threads);
  CHECK(empty.outer * empty.inner == 5);
  CHECK(empty.reduced == 0);
  CHECK(empty.chunks() == 1);
  CHECK(run_plan(empty, ReduceOp::sum, {}) == std::vector<double>(5, 0.0));
  CHECK(run_plan(empty, ReduceOp::amax, {}) == std::vector<double>(5, -kInf));
}

TEST_CASE("non-adjacent reduced dims walk strides", "[cuda_reduce_plan]") {
  const ReducePlan p = plan({2, 3, 4, 5}, {0, 2, 3});  // runs: R2 K3 R20
  CHECK(p.layout == ReduceLayout::strided);
  CHECK(p.outer == 3);
  CHECK(p.reduced == 40);
  REQUIRE(p.kept.rank == 1);
  CHECK(p.kept.size[0] == 3);
  CHECK(p.kept.stride[0] == 20);
  REQUIRE(p.reduced_dims.rank == 2);
  CHECK(p.reduced_dims.size[0] == 2);
  CHECK(p.reduced_dims.stride[0] == 60);
  CHECK(p.reduced_dims.size[1] == 20);
  CHECK(p.reduced_dims.stride[1] == 1);
  // index 21 of the reduced walk: (1, 1) -> 60 + 1
  CHECK(strided_offset(p.reduced_dims, 21) == 61);
  CHECK(strided_offset(p.kept, 2) == 40);
}

TEST_CASE("long reductions over few outputs are split into chunks", "[cuda_reduce_plan]") {
  const ReducePlan total = plan({1 << 20}, {0});  // a whole-tensor sum
  CHECK(total.layout == ReduceLayout::rows);
  CHECK(total.chunks() > 1);
  CHECK(total.chunk >= kRowChunkMin);
  CHECK(total.chunks() * total.chunk >= total.reduced);
  CHECK((total.chunks() - 1) * total.chunk < total.reduced);
  CHECK(total.chunks() <= kTargetBlocks);
  CHECK(total.partials() == total.chunks());

  const ReducePlan bias = plan({65536, 64}, {0});  // 2 column tiles, 65536 rows
  CHECK(bias.layout == ReduceLayout::columns);
  CHECK(bias.chunks() > 1);
  CHECK(bias.chunk >= kColumnChunkMin);
  CHECK(bias.partials() == bias.chunks() * 64);

  // Enough outputs to fill the GPU: one pass.
  CHECK(plan({4096, 100000}, {1}).chunks() == 1);
  // Few outputs but a short reduction: one pass.
  CHECK(plan({2, 10000}, {1}).chunks() == 1);
}

TEST_CASE("bad dims and too many runs fail naming the op", "[cuda_reduce_plan]") {
  CHECK_THROWS_AS(plan({2, 3}, {2}), Error);
  CHECK_THROWS_WITH(plan({2, 3}, {1, 0}), Contains("cuda_sum"));
  // 9 reduced runs alternating with 8 kept ones.
  std::vector<int64_t> shape(17, 2), dims;
  for (int64_t i = 0; i < 17; i += 2) dims.push_back(i);
  CHECK_THROWS_WITH(plan(shape, dims), Contains("cuda_sum") && Contains("runs"));
  // 8 of each still plans.
  shape.pop_back();
  dims.pop_back();
  CHECK(plan(shape, dims).layout == ReduceLayout::strided);
}

TEST_CASE("every plan computes the reduction (host emulation)", "[cuda_reduce_plan]") {
  std::mt19937 rng(7);
  // Hand-picked: each layout, split or not.
  check_against_direct(rng, {3, 50000}, {1});        // rows, split
  check_against_direct(rng, {3000, 40}, {0});        // columns, split, a partial column tile
  check_against_direct(rng, {2, 1500, 33}, {1});     // columns, split, outer 2
  check_against_direct(rng, {100, 3, 200}, {0, 2});  // strided, split
  check_against_direct(rng, {7, 100}, {1});          // rows
  check_against_direct(rng, {5, 17, 3}, {1});        // columns, unsplit
  check_against_direct(rng, {0, 4}, {0});            // empty reduction
  check_against_direct(rng, {4, 0}, {0});            // empty output
  check_against_direct(rng, {}, {});                 // a scalar
  // Random shapes of rank 0-5 with random dims.
  std::uniform_int_distribution<int> rank_of(0, 5), size_of(0, 9), coin(0, 1);
  const int64_t sizes[] = {0, 1, 1, 2, 3, 4, 5, 7, 19, 33};
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<int64_t> shape, dims;
    const int rank = rank_of(rng);
    for (int i = 0; i < rank; ++i) {
      shape.push_back(sizes[size_of(rng)]);
      if (coin(rng)) dims.push_back(i);
    }
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    if (n > 200000) continue;  // keeps the direct reduction quick
    check_against_direct(rng, shape, dims);
  }
}
