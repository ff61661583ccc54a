// Host-side plan of a sum or amax on the GPU (cuda_reduce.cpp), kept apart
// from the launch so it is tested without a device. The input's dims are
// coalesced into runs of kept and of reduced dims (size-1 dims dropped):
// one reduced run is an [outer, reduced, inner] problem, several a strided
// walk. A long reduction over too few outputs to fill the GPU is cut into
// chunks, each its own block, whose f64 partials a second pass folds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "executors/cuda/kernels/reduce.h"

namespace fsdpc::cuda {

enum class ReduceLayout : uint8_t {
  none,     // no output element: nothing to launch
  threads,  // launch_reduce_threads: short (or empty) reductions
  rows,     // launch_reduce_rows: reduced run innermost (inner == 1)
  columns,  // launch_reduce_columns: reduced run followed by kept dims
  strided,  // launch_reduce_strided: several reduced runs
};

// Reductions of at most this many elements run one thread per output.
constexpr int64_t kShortReduction = 16;
// A first pass is cut into chunks only while it has fewer blocks than half
// of this; it is cut to make about this many (an H100 has 132 SMs).
constexpr int64_t kTargetBlocks = 1024;
// The shortest chunk: a 1024-thread block loads 8 elements per thread; a
// column block (8 warps) 64 rows per warp.
constexpr int64_t kRowChunkMin = 8192;
constexpr int64_t kColumnChunkMin = 512;

struct ReducePlan {
  ReduceLayout layout = ReduceLayout::none;
  // threads, rows, columns: the input is [outer, reduced, inner]. strided:
  // outer = numel(kept), reduced = numel(reduced_dims), inner = 1. The
  // output has outer * inner elements.
  int64_t outer = 0, reduced = 0, inner = 1;
  StridedDims kept, reduced_dims;  // strided only, input strides in elements
  // Reduced elements per block of the first pass (rows, columns, strided);
  // chunks() > 1 means a second pass over the partials.
  int64_t chunk = 0;

  int64_t chunks() const;
  // f64 partials the first pass writes when split ([outer, chunks, inner]),
  // 0 when the first pass writes the output.
  int64_t partials() const;
};

// Plans sum or amax of a contiguous row-major tensor of `shape` over `dims`
// (strictly increasing, each in [0, rank)). Fails naming `what` (cuda_sum)
// when the dims are out of range or need more than kMaxStridedDims runs.
ReducePlan plan_reduce(const std::vector<int64_t>& shape, const std::vector<int64_t>& dims, const std::string& what);

// The offset of index k of a strided walk, as the device computes it.
int64_t strided_offset(const StridedDims& d, int64_t k);

}  // namespace fsdpc::cuda
