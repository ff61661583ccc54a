// The CUDA nn kernels' host-side planning (executors/cuda/nn_plan.h: the row
// split of softmax / layer_norm / cross_entropy, the warp-or-block choice and
// its geometry, attention's head groups), which needs no GPU. The launches
// themselves are checked on a device in test/gpu/gpu_nn_launch_test.cpp.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <vector>

#include "executors/cuda/nn_plan.h"

using namespace fsdpc::cuda;

TEST_CASE("split_at: a softmax dim splits the shape into outer, n, inner", "[cuda][nn_plan]") {
  const std::vector<int64_t> s{2, 3, 4, 5};
  auto a = split_at(s, 3);  // the last dim: rows of 5
  CHECK(a.outer == 24);
  CHECK(a.n == 5);
  CHECK(a.inner == 1);
  a = split_at(s, 1);
  CHECK(a.outer == 2);
  CHECK(a.n == 3);
  CHECK(a.inner == 20);
  a = split_at(s, 0);
  CHECK(a.outer == 1);
  CHECK(a.n == 2);
  CHECK(a.inner == 60);
  a = split_at({7}, 0);
  CHECK((a.outer == 1 && a.n == 7 && a.inner == 1));
  a = split_at({4, 0, 3}, 2);  // an empty tensor plans zero rows
  CHECK(a.outer == 0);
}

TEST_CASE("split_rows: rows of the last dim", "[cuda][nn_plan]") {
  auto r = split_rows({8, 1024, 768});
  CHECK(r.rows == 8 * 1024);
  CHECK(r.cols == 768);
  r = split_rows({50257});
  CHECK((r.rows == 1 && r.cols == 50257));
  r = split_rows({});
  CHECK((r.rows == 1 && r.cols == 1));
  r = split_rows({0, 10});
  CHECK((r.rows == 0 && r.cols == 10));
}

TEST_CASE("plan_row_launch: many short rows get a warp each", "[cuda][nn_plan]") {
  const RowLaunch r = plan_row_launch(8192, 768);
  CHECK(r.warp_per_row);
  CHECK(r.launch.block == static_cast<uint32_t>(kWarpRowBlock));
  // 8192 rows of one warp each, eight warps a block.
  CHECK(r.launch.grid == 8192 / (kWarpRowBlock / kWarp));
  // Capped grid: the kernel's warps loop over the remaining rows.
  const RowLaunch big = plan_row_launch(int64_t{1} << 24, 64);
  CHECK(big.warp_per_row);
  CHECK(big.launch.grid == static_cast<uint32_t>(kMaxGrid));
}

TEST_CASE("plan_row_launch: long rows, or few rows, get a block each", "[cuda][nn_plan]") {
  RowLaunch r = plan_row_launch(8192, 50257);  // GPT-2's vocabulary
  CHECK_FALSE(r.warp_per_row);
  CHECK(r.launch.block == 1024);
  CHECK(r.launch.grid == 4224);
  r = plan_row_launch(kWarpRowMinRows, kWarpRowMaxCols + 1);
  CHECK_FALSE(r.warp_per_row);
  r = plan_row_launch(kWarpRowMinRows, kWarpRowMaxCols);
  CHECK(r.warp_per_row);
  r = plan_row_launch(16, 768);  // few rows: a block each spreads the work
  CHECK_FALSE(r.warp_per_row);
  CHECK(r.launch.grid == 16);
  CHECK(r.launch.block == 1024);
  r = plan_row_launch(16, 100);
  CHECK(r.launch.block == 128);
  // Whatever the path, blocks are whole warps (the reductions shuffle full warps).
  for (int64_t rows : {1, 100, 1024, 5000})
    for (int64_t cols : {1, 31, 33, 1000, 1025, 100000}) {
      const RowLaunch p = plan_row_launch(rows, cols);
      CHECK(p.launch.block % kWarp == 0);
      CHECK(p.launch.block <= static_cast<uint32_t>(kMaxBlock));
      CHECK(p.launch.grid >= 1);
      CHECK(p.launch.grid <= static_cast<uint32_t>(kMaxGrid));
    }
}

TEST_CASE("plan_row_launch: empty tensors launch nothing", "[cuda][nn_plan]") {
  CHECK(plan_row_launch(0, 100).launch.grid == 0);
  CHECK(plan_row_launch(100, 0).launch.grid == 0);
}

TEST_CASE("plan_attention: sizes, steps and head groups", "[cuda][nn_plan]") {
  // GPT-2 small: batch 8, 12 heads, 1024 tokens, head size 64.
  const std::vector<int64_t> q{8, 12, 1024, 64};
  AttentionPlan p = plan_attention(q, q, q, kAttentionScoreFloats);
  CHECK(p.batch == 96);
  CHECK((p.tq == 1024 && p.tk == 1024 && p.d == 64 && p.dv == 64));
  CHECK(p.q_step == 1024 * 64);
  CHECK(p.k_step == 1024 * 64);
  CHECK(p.v_step == 1024 * 64);
  CHECK(p.o_step == 1024 * 64);
  CHECK(p.s_step == 1024 * 1024);
  CHECK(p.group == 16);  // 64 MiB of f32 scores
  CHECK(p.fits_int);
  CHECK_FALSE(p.empty());

  // Cross-attention shapes: Tq != Tk, D != Dv.
  p = plan_attention({2, 5, 8}, {2, 7, 8}, {2, 7, 3}, 1000);
  CHECK((p.batch == 2 && p.tq == 5 && p.tk == 7 && p.d == 8 && p.dv == 3));
  CHECK(p.q_step == 40);
  CHECK(p.k_step == 56);
  CHECK(p.v_step == 21);
  CHECK(p.o_step == 15);
  CHECK(p.s_step == 35);
  CHECK(p.group == 2);  // the whole batch fits the budget

  // A budget below one matrix still runs one at a time.
  p = plan_attention({3, 64, 16}, {3, 64, 16}, {3, 64, 16}, 100);
  CHECK(p.group == 1);
  // Rank 2: one matrix.
  p = plan_attention({4, 2}, {6, 2}, {6, 5}, kAttentionScoreFloats);
  CHECK((p.batch == 1 && p.group == 1));
}

TEST_CASE("plan_attention: empty outputs and cuBLAS's int range", "[cuda][nn_plan]") {
  CHECK(plan_attention({0, 4, 8}, {0, 4, 8}, {0, 4, 8}, 100).empty());
  CHECK(plan_attention({2, 0, 8}, {2, 4, 8}, {2, 4, 8}, 100).empty());
  CHECK(plan_attention({2, 4, 8}, {2, 4, 8}, {2, 4, 0}, 100).empty());
  // No keys or no features: not empty, the kernel writes zeros / uniform weights.
  AttentionPlan p = plan_attention({2, 4, 8}, {2, 0, 8}, {2, 0, 8}, 100);
  CHECK_FALSE(p.empty());
  CHECK(p.group == 2);
  p = plan_attention({2, 4, 0}, {2, 4, 0}, {2, 4, 3}, 100);
  CHECK_FALSE(p.empty());
  const int64_t huge = int64_t{std::numeric_limits<int>::max()} + 1;
  CHECK_FALSE(plan_attention({1, 1, huge}, {1, 1, huge}, {1, 1, 1}, 100).fits_int);
  CHECK(plan_attention({1, 1, 8}, {1, 1, 8}, {1, 1, 1}, 100).fits_int);
}
