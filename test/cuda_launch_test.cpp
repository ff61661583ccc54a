// Launch geometry (executors/cuda/launch.h), planned on the host: grids stay
// within what fills a GPU, blocks are whole warps, and a grid-stride loop
// over the planned grid visits every element exactly once.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "executors/cuda/launch.h"

using namespace fsdpc::cuda;

namespace {

// What a grid-stride kernel does with the plan, on the host.
std::vector<int> visits(const Launch& l, int64_t n) {
  std::vector<int> seen(static_cast<size_t>(n), 0);
  const int64_t stride = static_cast<int64_t>(l.grid) * l.block;
  for (int64_t t = 0; t < stride; ++t)
    for (int64_t i = t; i < n; i += stride) ++seen[static_cast<size_t>(i)];
  return seen;
}

}  // namespace

TEST_CASE("launch_1d covers every element once with a capped grid", "[cuda][launch]") {
  CHECK(launch_1d(0).grid == 0);  // nothing to launch
  for (int64_t n : {1, 255, 256, 257, 100000, 4224 * 256 + 1}) {
    INFO("n = " << n);
    const Launch l = launch_1d(n);
    CHECK(l.block == 256);
    CHECK(l.grid >= 1);
    CHECK(static_cast<int64_t>(l.grid) <= kMaxGrid);
    CHECK(static_cast<int64_t>(l.grid) == std::min<int64_t>((n + 255) / 256, kMaxGrid));
    const std::vector<int> seen = visits(l, n);
    CHECK(std::all_of(seen.begin(), seen.end(), [](int v) { return v == 1; }));
  }
  // A tensor far past the cap (823M logits of gpt2 at batch 16) still gets the capped grid.
  const Launch big = launch_1d(int64_t{16} * 1024 * 50257, 128);
  CHECK(big.grid == kMaxGrid);
  CHECK(big.block == 128);
}

TEST_CASE("launch_rows gives each row a power-of-two block of whole warps", "[cuda][launch]") {
  CHECK(launch_rows(0, 10).grid == 0);
  CHECK(launch_rows(5, 1).block == 32);
  CHECK(launch_rows(5, 33).block == 64);
  CHECK(launch_rows(5, 768).block == 1024);
  CHECK(launch_rows(5, 1024).block == 1024);
  CHECK(launch_rows(5, 50257).block == 1024);  // longer rows: threads stride
  CHECK(launch_rows(5, 768).grid == 5);
  CHECK(static_cast<int64_t>(launch_rows(1 << 20, 64).grid) == kMaxGrid);  // blocks loop over rows
}
