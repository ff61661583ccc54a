// Launch geometry, planned on the host (and unit-tested without a GPU).
// Elementwise kernels use grid-stride loops over a grid capped to what fills
// any current GPU, so a grid never exceeds the hardware limits however large
// the tensor; row kernels (softmax, layer_norm, cross_entropy) give each row
// one block, or one warp when rows are short.
#pragma once

#include <cstdint>

namespace fsdpc::cuda {

constexpr int kWarp = 32;
constexpr int kMaxBlock = 1024;
// 132 SMs on an H100 SXM, 2048 resident threads each: 8 blocks of 256 per SM
// are resident at once, so 132 * 8 * 4 blocks give every SM four waves'
// worth; more only adds scheduling.
constexpr int64_t kMaxGrid = 4224;

struct Launch {
  uint32_t grid = 0;   // blocks; 0: nothing to launch
  uint32_t block = 0;  // threads per block
};

// `n` independent elements, each thread a grid-stride loop. `block` must be
// a positive multiple of the warp size, at most 1024.
Launch launch_1d(int64_t n, int block = 256);

// `rows` rows of `cols` elements, one block per row: the block has enough
// warps to cover the row once (a power of two from 32 to 1024) and the
// threads stride over longer rows. The grid is capped as launch_1d's and
// blocks loop over rows.
Launch launch_rows(int64_t rows, int64_t cols);

}  // namespace fsdpc::cuda
