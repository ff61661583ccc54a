// The host-side plans of the CUDA data-movement ops (executors/cuda/
// copy_plan.h), checked without a GPU: each plan is run on host buffers by
// a walker that decomposes the linear thread index exactly as
// kernels/copy.cu's strided_copy_kernel does, and the result is compared
// with the op computed by plain nested loops.
#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>

#include "executors/cuda/copy_plan.h"
#include "ir/error.h"

using namespace fsdpc;
using namespace fsdpc::cuda;
using Catch::Contains;

namespace {

using Values = std::vector<int64_t>;

// 0, 1, 2, ...: every element names its own source offset.
Values iota_values(int64_t n) {
  Values v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// Runs the plan as the GPU would: every piece, every linear index i of its
// walk decomposed innermost dim first (strided_copy_kernel's arithmetic).
Values run(const CopyPlan& plan, const Values& src, int64_t dst_count, int64_t background = -1) {
  Values dst(dst_count, background);
  for (const CopyPiece& p : plan.pieces) {
    int64_t n = 1;
    for (int k = 0; k < p.desc.rank; ++k) n *= p.desc.size[k];
    for (int64_t i = 0; i < n; ++i) {
      int64_t rest = i, s = 0, o = 0;
      for (int k = p.desc.rank - 1; k >= 0; --k) {
        const int64_t c = rest % p.desc.size[k];
        rest /= p.desc.size[k];
        s += c * p.desc.src[k];
        o += c * p.desc.dst[k];
      }
      dst.at(p.dst_offset + o) = src.at(p.src_offset + s);
    }
  }
  return dst;
}

Values desc_sizes(const CopyDesc& d) { return Values(d.size, d.size + d.rank); }
Values desc_src(const CopyDesc& d) { return Values(d.src, d.src + d.rank); }
Values desc_dst(const CopyDesc& d) { return Values(d.dst, d.dst + d.rank); }

}  // namespace

TEST_CASE("row-major strides", "[cuda][copy_plan]") {
  CHECK(row_major_strides({2, 3, 4}) == Strides{12, 4, 1});
  CHECK(row_major_strides({5}) == Strides{1});
  CHECK(row_major_strides({}).empty());
}

TEST_CASE("coalescing merges contiguous dims and drops size-1 dims", "[cuda][copy_plan]") {
  const CopyPlan whole = plan_copy({2, 3, 4}, {12, 4, 1}, {12, 4, 1});
  REQUIRE(whole.pieces.size() == 1);
  CHECK(whole.count == 24);
  CHECK(desc_sizes(whole.pieces[0].desc) == Values{24});
  CHECK(whole.contiguous());

  const CopyPlan ones = plan_copy({1, 5, 1}, {5, 1, 1}, {5, 1, 1});
  CHECK(desc_sizes(ones.pieces[0].desc) == Values{5});
  CHECK(ones.contiguous());

  // Rows of 4 out of rows of 6: the row dim stays, its strides differ.
  const CopyPlan rows = plan_copy({3, 4}, {6, 1}, {4, 1}, 2, 0);
  const CopyDesc& d = rows.pieces[0].desc;
  CHECK(desc_sizes(d) == Values{3, 4});
  CHECK(desc_src(d) == Values{6, 1});
  CHECK(desc_dst(d) == Values{4, 1});
  CHECK(rows.pieces[0].src_offset == 2);
  CHECK_FALSE(rows.contiguous());

  // A scalar repeated over a whole output is one dim of source stride 0.
  const CopyPlan splat = plan_copy({2, 3}, {0, 0}, {3, 1});
  CHECK(desc_sizes(splat.pieces[0].desc) == Values{6});
  CHECK(desc_src(splat.pieces[0].desc) == Values{0});

  CHECK(plan_copy({2, 0, 3}, {0, 3, 1}, {0, 3, 1}).pieces.empty());
  const CopyPlan scalar = plan_copy({}, {}, {});
  REQUIRE(scalar.pieces.size() == 1);
  CHECK(scalar.pieces[0].desc.rank == 0);
  CHECK(scalar.contiguous());
}

TEST_CASE("a permute reads the input in the output's order", "[cuda][copy_plan]") {
  const Shape in = {2, 3, 4};
  const CopyPlan plan = plan_permute("cuda_permute", in, {4, 2, 3}, {2, 0, 1});
  REQUIRE(plan.pieces.size() == 1);
  CHECK(desc_sizes(plan.pieces[0].desc) == Values{4, 6});  // dims 0 and 1 of the input stay together
  CHECK(desc_src(plan.pieces[0].desc) == Values{1, 4});
  CHECK(desc_dst(plan.pieces[0].desc) == Values{6, 1});
  const Values got = run(plan, iota_values(24), 24);
  Values want;
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j) want.push_back(i * 12 + j * 4 + k);
  CHECK(got == want);

  // Heads out of [B, T, H, D]: the D rows stay contiguous on both sides.
  const CopyPlan heads = plan_permute("cuda_permute", {2, 3, 4, 5}, {2, 4, 3, 5}, {0, 2, 1, 3});
  CHECK(desc_src(heads.pieces[0].desc).back() == 1);
  CHECK(desc_dst(heads.pieces[0].desc).back() == 1);
  const Values h = run(heads, iota_values(120), 120);
  int64_t at = 0;
  bool all = true;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t hh = 0; hh < 4; ++hh)
      for (int64_t t = 0; t < 3; ++t)
        for (int64_t d = 0; d < 5; ++d) all = all && h[at++] == ((b * 3 + t) * 4 + hh) * 5 + d;
  CHECK(all);

  CHECK(plan_permute("cuda_permute", {2, 3}, {2, 3}, {0, 1}).contiguous());
  CHECK_THROWS_WITH(plan_permute("cuda_permute", {2, 3}, {2, 2}, {0, 0}),
                    Contains("cuda_permute") && Contains("not a permutation"));
  CHECK_THROWS_AS(plan_permute("cuda_permute", {2, 3}, {2, 3}, {1, 0}), Error);
}

TEST_CASE("a broadcast repeats with source stride 0", "[cuda][copy_plan]") {
  // A bias [3] over rows [2, 3].
  const CopyPlan bias = plan_broadcast("cuda_broadcast_in_dim", {3}, {2, 3}, {1});
  CHECK(desc_src(bias.pieces[0].desc) == Values{0, 1});
  CHECK(run(bias, {10, 11, 12}, 6) == Values{10, 11, 12, 10, 11, 12});

  // A column [3, 1] across 4 columns.
  const CopyPlan col = plan_broadcast("cuda_broadcast_in_dim", {3, 1}, {3, 4}, {0, 1});
  CHECK(desc_src(col.pieces[0].desc) == Values{1, 0});
  CHECK(run(col, {7, 8, 9}, 12) == Values{7, 7, 7, 7, 8, 8, 8, 8, 9, 9, 9, 9});

  // A scalar into [2, 2, 2]: one dim of 8, stride 0.
  const CopyPlan splat = plan_broadcast("cuda_broadcast_in_dim", {}, {2, 2, 2}, {});
  CHECK(desc_sizes(splat.pieces[0].desc) == Values{8});
  CHECK(run(splat, {5}, 8) == Values(8, 5));

  // A middle dim inserted: [2, 3] -> [2, 4, 3].
  const CopyPlan mid = plan_broadcast("cuda_broadcast_in_dim", {2, 3}, {2, 4, 3}, {0, 2});
  const Values m = run(mid, iota_values(6), 24);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t k = 0; k < 3; ++k) CHECK(m[(i * 4 + j) * 3 + k] == i * 3 + k);

  CHECK_THROWS_WITH(plan_broadcast("cuda_broadcast_in_dim", {2}, {2, 3}, {1}),
                    Contains("cuda_broadcast_in_dim") && Contains("cannot broadcast"));
  CHECK_THROWS_AS(plan_broadcast("cuda_broadcast_in_dim", {2, 3}, {2, 3}, {1, 0}), Error);
}

TEST_CASE("a slice with strides starts at its offset and steps", "[cuda][copy_plan]") {
  // Rows 1 and 3, columns 0, 3 of a [4, 6].
  const CopyPlan plan = plan_slice("cuda_slice", {4, 6}, {2, 2}, {1, 0}, {2, 3});
  REQUIRE(plan.pieces.size() == 1);
  CHECK(plan.pieces[0].src_offset == 6);
  CHECK(desc_src(plan.pieces[0].desc) == Values{12, 3});
  CHECK(run(plan, iota_values(24), 4) == Values{6, 9, 18, 21});

  // A slice of whole rows is one contiguous run.
  const CopyPlan rows = plan_slice("cuda_slice", {4, 6}, {2, 6}, {1, 0}, {1, 1});
  CHECK(rows.contiguous());
  CHECK(rows.pieces[0].src_offset == 6);
  CHECK(rows.count == 12);

  // The padding off a gathered shard: the first 5 of 6 rows.
  CHECK(plan_slice("cuda_slice", {6, 3}, {5, 3}, {0, 0}, {1, 1}).contiguous());

  CHECK(plan_slice("cuda_slice", {4, 0}, {2, 0}, {0, 0}, {1, 1}).pieces.empty());
  CHECK_THROWS_WITH(plan_slice("cuda_slice", {4, 6}, {3, 2}, {1, 0}, {2, 3}),
                    Contains("cuda_slice") && Contains("past dim 0"));
  CHECK_THROWS_AS(plan_slice("cuda_slice", {4, 6}, {2, 2}, {0, 0}, {0, 1}), Error);
}

TEST_CASE("pad places the input at lo with interior gaps", "[cuda][copy_plan]") {
  // [2, 2] -> lo (1, 0), interior (1, 1), hi (0, 1): [4, 4].
  const CopyPlan plan = plan_pad("cuda_pad", {2, 2}, {4, 4}, {1, 0}, {1, 1});
  CHECK(plan.pieces[0].dst_offset == 4);
  const Values got = run(plan, {1, 2, 3, 4}, 16, 0);
  CHECK(got == Values{0, 0, 0, 0,  //
                      1, 0, 2, 0,  //
                      0, 0, 0, 0,  //
                      3, 0, 4, 0});
  // Plain lo/hi padding of the last dim: rows of 3 land at stride 5.
  const CopyPlan rows = plan_pad("cuda_pad", {2, 3}, {2, 5}, {0, 1}, {0, 0});
  CHECK(run(rows, iota_values(6), 10, -1) == Values{-1, 0, 1, 2, -1, -1, 3, 4, 5, -1});
  CHECK_THROWS_WITH(plan_pad("cuda_pad", {2, 3}, {2, 4}, {0, 2}, {0, 0}), Contains("cuda_pad"));
}

TEST_CASE("cat writes each input's slab of the output", "[cuda][copy_plan]") {
  const std::vector<CopyPlan> plans = plan_cat("cuda_cat", {{2, 1}, {2, 2}}, {2, 3}, 1);
  REQUIRE(plans.size() == 2);
  CHECK(plans[1].pieces[0].dst_offset == 1);
  Values out(6, -1);
  const Values a = run(plans[0], {100, 101}, 6), b = run(plans[1], {0, 1, 2, 3}, 6);
  for (size_t i = 0; i < 6; ++i) out[i] = a[i] != -1 ? a[i] : b[i];
  CHECK(out == Values{100, 0, 1, 101, 2, 3});

  // Along dim 0 each input is one contiguous run at its offset.
  const std::vector<CopyPlan> rows = plan_cat("cuda_cat", {{1, 3}, {2, 3}}, {3, 3}, 0);
  CHECK(rows[0].contiguous());
  CHECK(rows[1].contiguous());
  CHECK(rows[1].pieces[0].dst_offset == 3);

  CHECK_THROWS_WITH(plan_cat("cuda_cat", {{2, 1}, {2, 1}}, {2, 3}, 1), Contains("add up to 2"));
  CHECK_THROWS_AS(plan_cat("cuda_cat", {{3, 1}, {2, 2}}, {2, 3}, 1), Error);
}

TEST_CASE("walks of more than eight dims are split on the host", "[cuda][copy_plan]") {
  // Reversing ten dims of 2 leaves nothing to merge: 4 pieces of 8 dims.
  const Shape in(10, 2);
  const IntList dims = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
  const CopyPlan plan = plan_permute("cuda_permute", in, in, dims);
  REQUIRE(plan.pieces.size() == 4);
  for (const CopyPiece& p : plan.pieces) CHECK(p.desc.rank == kMaxCopyDims);
  const Values got = run(plan, iota_values(1024), 1024);
  bool all = true;
  for (int64_t o = 0; o < 1024; ++o) {
    int64_t s = 0;  // output bit k is input bit 9 - k: the index bit-reversed
    for (int k = 0; k < 10; ++k) s |= ((o >> k) & 1) << (9 - k);
    all = all && got[o] == s;
  }
  CHECK(all);
  CHECK(plan_extent(plan) == std::pair<int64_t, int64_t>{1024, 1024});
}

TEST_CASE("bucket offsets are running sums of the parts", "[cuda][copy_plan]") {
  CHECK(bucket_offsets({12, 0, 40, 8}) == std::vector<int64_t>{0, 12, 12, 52, 60});
  CHECK(bucket_offsets({}) == std::vector<int64_t>{0});
}

TEST_CASE("widening moves aligned contiguous runs in 16-byte units", "[cuda][copy_plan]") {
  CHECK(widest_unit({64, 256, 512}) == 16);
  CHECK(widest_unit({24, 256}) == 8);
  CHECK(widest_unit({6, 256}) == 2);
  CHECK(widest_unit({3}) == 1);

  // f32 rows of 8 out of rows of 12: 32-byte runs, 48-byte source stride.
  CopyDesc d = plan_copy({5, 8}, {12, 1}, {8, 1}).pieces[0].desc;
  CHECK(widen(d, 4, 256, 512) == 16);
  CHECK(desc_sizes(d) == Values{5, 2});
  CHECK(desc_src(d) == Values{3, 1});
  CHECK(desc_dst(d) == Values{2, 1});

  // A misaligned start (a slice one element in) keeps the element size
  // that still divides everything.
  CopyDesc off = plan_copy({5, 8}, {12, 1}, {8, 1}).pieces[0].desc;
  CHECK(widen(off, 4, 256 + 4, 512) == 4);
  CHECK(desc_sizes(off) == Values{5, 8});

  // Strided innermost dims are never widened.
  CopyDesc strided = plan_copy({4, 4}, {1, 4}, {4, 1}).pieces[0].desc;
  CHECK(widen(strided, 4, 0, 0) == 4);
}

TEST_CASE("fill patterns convert the value as the IR does", "[cuda][copy_plan]") {
  CHECK(fill_pattern(1.0, DType::f32) == 0x3f800000u);
  CHECK(fill_pattern(-2.0, DType::f64) == 0xc000000000000000ull);
  CHECK(fill_pattern(1.0, DType::bf16) == 0x3f80u);
  CHECK(fill_pattern(1.0, DType::f16) == 0x3c00u);
  CHECK(fill_pattern(-1.7, DType::i32) == 0xffffffffu);  // toward zero: -1
  CHECK(fill_pattern(3.9, DType::i64) == 3u);
  CHECK(fill_pattern(0.5, DType::boolean) == 1u);
  CHECK(fill_pattern(0.0, DType::boolean) == 0u);
  CHECK(fill_pattern(-1e30, DType::f32) == 0xf149f2cau);
  // Out of range saturates and NaN is 0, as launch_convert (a plain cast is undefined).
  CHECK(fill_pattern(1e10, DType::i32) == 0x7fffffffu);
  CHECK(fill_pattern(-INFINITY, DType::i32) == 0x80000000u);
  CHECK(fill_pattern(NAN, DType::i32) == 0u);
  CHECK(fill_pattern(1e30, DType::i64) == 0x7fffffffffffffffull);
  CHECK(fill_pattern(-1e30, DType::i64) == 0x8000000000000000ull);
  CHECK(fill_pattern(NAN, DType::i64) == 0u);
  CHECK(fill_pattern(2147483647.0, DType::i32) == 0x7fffffffu);
}
