// Row-major layouts and walks over two strided buffers: what every executor
// that moves data shares (the reference executor, the CPU kernels and the
// CUDA copy planning), so the rules are written once.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/types.h"

namespace fsdpc {

using Strides = std::vector<int64_t>;

// Row-major strides of `shape`, in elements.
Strides row_major_strides(const Shape& shape);

// One dim of a walk over two strided buffers: extent, source stride,
// destination stride (in elements; 0 on a side that does not move).
struct StridedDim {
  int64_t size, src, dst;
};

// Appends `d` to `dims`: size-1 dims carry no data and are dropped, and a dim
// whose two sides continue the previous one contiguously (its stride times
// its extent equals the previous one's stride, on both sides) is merged.
void push_coalesced(std::vector<StridedDim>& dims, StridedDim d);

}  // namespace fsdpc
