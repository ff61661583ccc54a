// Launch functions of the reduction kernels (kernels/reduce.cu): sum and
// amax of a contiguous tensor in one of four layouts that the host plans
// (executors/cuda/reduce_plan.h), enqueued on `stream`, never synchronised.
//
// Inputs and outputs are f32, bf16 or f64 (f64 holds the partial results
// between the two passes of a split reduction). Every kernel accumulates in
// f64, so a long f32 sum is within one f32 rounding of the exact sum, as on
// the CPU; amax propagates NaN; an empty reduction gives 0 (sum) or -inf
// (amax).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "executors/cuda/kernels/element_type.h"

namespace fsdpc::cuda {

enum class ReduceOp : uint8_t { sum, amax };

// Dims of a strided walk, outermost first: index k visits element offset
// sum_d ((k / prod(size[d+1:])) % size[d]) * stride[d].
constexpr int kMaxStridedDims = 8;
struct StridedDims {
  int rank = 0;
  int64_t size[kMaxStridedDims] = {};
  int64_t stride[kMaxStridedDims] = {};
};

// x is [rows, cols]; each row is cut into chunks of `chunk` elements
// (chunks = ceil(cols / chunk), cols >= 1): y[row * chunks + c] folds
// x[row, c*chunk .. min(cols, (c+1)*chunk)). One block per (row, chunk).
void launch_reduce_rows(ReduceOp op, ElementType xt, const void* x, ElementType yt, void* y, int64_t rows,
                        int64_t cols, int64_t chunk, cudaStream_t stream);

// x is [outer, reduced, inner] (reduced >= 1), the reduced extent cut into
// chunks as above: y[(o * chunks + c) * inner + i] folds x[o, r, i] over r in
// chunk c. A block takes 32 adjacent i (coalesced) and splits r among warps.
void launch_reduce_columns(ReduceOp op, ElementType xt, const void* x, ElementType yt, void* y, int64_t outer,
                           int64_t reduced, int64_t inner, int64_t chunk, cudaStream_t stream);

// x is [outer, reduced, inner] (reduced may be 0): y[o * inner + i] folds
// x[o, :, i], one thread per output; for short reductions.
void launch_reduce_threads(ReduceOp op, ElementType xt, const void* x, ElementType yt, void* y, int64_t outer,
                           int64_t reduced, int64_t inner, cudaStream_t stream);

// Output k (of numel(kept)) folds x[kept(k) + reduced(j)] over
// j < numel(reduced) >= 1, cut into chunks as launch_reduce_rows:
// y[k * chunks + c]. For reduced dims that do not coalesce into one run.
void launch_reduce_strided(ReduceOp op, ElementType xt, const void* x, ElementType yt, void* y,
                           const StridedDims& kept, const StridedDims& reduced, int64_t chunk, cudaStream_t stream);

}  // namespace fsdpc::cuda
