// Device code of sum and amax (reduce.h). Every thread folds its elements
// into an f64 accumulator (f32 sums of millions of elements stay within one
// f32 rounding of the exact sum, and f64 adds cost nothing next to the
// loads on an A100/H100), then a fixed tree combines the threads of a block,
// so results are deterministic: no atomics.
#include "executors/cuda/kernels/reduce.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "executors/cuda/cuda_check.h"
#include "executors/cuda/kernels/device_util.cuh"
#include "executors/cuda/launch.h"

namespace fsdpc::cuda {

namespace {

using bf16 = __nv_bfloat16;

// The column kernel's block: 32 adjacent columns x 8 warps along the
// reduced dim (each warp reads 32 contiguous elements per step).
constexpr int kColumnWarps = 8;

__device__ __forceinline__ double widen(float v) { return v; }
__device__ __forceinline__ double widen(bf16 v) { return to_f32(v); }
__device__ __forceinline__ double widen(double v) { return v; }

// One rounding from the f64 accumulator to the output type.
template <class T>
__device__ __forceinline__ T narrow(double v) {
  if constexpr (std::is_same_v<T, bf16>)
    return __double2bfloat16(v);
  else
    return static_cast<T>(v);
}

__device__ __forceinline__ double identity(ReduceOp op) {
  return op == ReduceOp::sum ? 0.0 : -static_cast<double>(INFINITY);
}

// NaN wins in amax, whichever side it is on (as the CPU and the reference).
__device__ __forceinline__ double fold(ReduceOp op, double a, double v) {
  if (op == ReduceOp::sum) return a + v;
  return (v > a || v != v) ? v : a;
}

// fold as block_reduce's merge: fold(own, partner's), so thread 0 folds in
// a fixed tree order.
struct Fold {
  ReduceOp op;
  __device__ __forceinline__ double operator()(double a, double v) const { return fold(op, a, v); }
};

// Element offset of index k of a strided walk (reduce.h). Unrolled over the
// fixed maximum so the dims stay in registers, not local memory.
__device__ __forceinline__ int64_t strided_offset(const StridedDims& d, int64_t k) {
  int64_t offset = 0;
#pragma unroll
  for (int i = kMaxStridedDims - 1; i >= 0; --i) {
    if (i < d.rank) {
      const int64_t q = k / d.size[i];
      offset += (k - q * d.size[i]) * d.stride[i];
      k = q;
    }
  }
  return offset;
}

// Where row `row`'s j-th element lives: contiguous rows, or a strided walk.
struct RowMap {
  int64_t cols;
  __device__ int64_t base(int64_t row) const { return row * cols; }
  __device__ int64_t at(int64_t j) const { return j; }
};

struct StridedMap {
  StridedDims kept, reduced;
  __device__ int64_t base(int64_t row) const { return strided_offset(kept, row); }
  __device__ int64_t at(int64_t j) const { return strided_offset(reduced, j); }
};

// One block per (row, chunk) task, blocks striding over tasks.
template <class In, class Out, class Map>
__global__ void rows_kernel(ReduceOp op, const In* __restrict__ x, Out* __restrict__ y, int64_t rows, int64_t cols,
                            int64_t chunk, Map map) {
  const int64_t chunks = (cols + chunk - 1) / chunk;
  const int64_t tasks = rows * chunks;
  for (int64_t t = blockIdx.x; t < tasks; t += gridDim.x) {
    const int64_t row = t / chunks;
    const int64_t begin = (t - row * chunks) * chunk;
    const int64_t end = begin + chunk < cols ? begin + chunk : cols;
    const In* p = x + map.base(row);
    double acc = identity(op);
    for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) acc = fold(op, acc, widen(p[map.at(j)]));
    acc = block_reduce(acc, Fold{op}, identity(op));
    if (threadIdx.x == 0) y[t] = narrow<Out>(acc);
  }
}

// One block per (outer, chunk, 32-column tile) task; needs blockDim.x ==
// kColumnWarps * kWarp. Thread (ty, tx) folds rows ty, ty + 8, ... of
// column tx; the 8 partial folds are combined in shared memory.
template <class In, class Out>
__global__ void columns_kernel(ReduceOp op, const In* __restrict__ x, Out* __restrict__ y, int64_t outer,
                               int64_t reduced, int64_t inner, int64_t chunk) {
  __shared__ double tile[kColumnWarps][kWarp + 1];
  const int tx = static_cast<int>(threadIdx.x) % kWarp, ty = static_cast<int>(threadIdx.x) / kWarp;
  const int64_t chunks = (reduced + chunk - 1) / chunk;
  const int64_t col_tiles = (inner + kWarp - 1) / kWarp;
  const int64_t tasks = outer * chunks * col_tiles;
  for (int64_t t = blockIdx.x; t < tasks; t += gridDim.x) {
    const int64_t oc = t / col_tiles;  // o * chunks + c
    const int64_t i = (t - oc * col_tiles) * kWarp + tx;
    const int64_t o = oc / chunks;
    const int64_t begin = (oc - o * chunks) * chunk;
    const int64_t end = begin + chunk < reduced ? begin + chunk : reduced;
    double acc = identity(op);
    if (i < inner) {
      const In* p = x + o * reduced * inner + i;
      for (int64_t r = begin + ty; r < end; r += kColumnWarps) acc = fold(op, acc, widen(p[r * inner]));
    }
    __syncthreads();  // the previous task's reads of `tile` are done
    tile[ty][tx] = acc;
    __syncthreads();
    if (ty == 0 && i < inner) {
      for (int w = 1; w < kColumnWarps; ++w) acc = fold(op, acc, tile[w][tx]);
      y[oc * inner + i] = narrow<Out>(acc);
    }
  }
}

// One thread per output, grid-stride.
template <class In, class Out>
__global__ void threads_kernel(ReduceOp op, const In* __restrict__ x, Out* __restrict__ y, int64_t outer,
                               int64_t reduced, int64_t inner) {
  const int64_t n = outer * inner;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += step) {
    const int64_t o = k / inner, i = k - o * inner;
    double acc = identity(op);
    for (int64_t r = 0; r < reduced; ++r) acc = fold(op, acc, widen(x[(o * reduced + r) * inner + i]));
    y[k] = narrow<Out>(acc);
  }
}

// Calls f(T{}) with T the storage type of t (f32, bf16, f64).
template <class F>
void with_type(ElementType t, F&& f) {
  switch (t) {
    case ElementType::f32: return f(float{});
    case ElementType::bf16: return f(bf16{});
    case ElementType::f64: return f(double{});
    default: break;
  }
  FSDPC_CHECK(false) << "a reduction over element type " << static_cast<int>(t) << " reached the kernel";
}

template <class F>
void with_types(ElementType xt, ElementType yt, F&& f) {
  with_type(xt, [&](auto x_tag) { with_type(yt, [&](auto y_tag) { f(x_tag, y_tag); }); });
}

int64_t numel_of(const StridedDims& d) {
  FSDPC_CHECK(d.rank >= 0 && d.rank <= kMaxStridedDims) << "strided rank " << d.rank;
  int64_t n = 1;
  for (int i = 0; i < d.rank; ++i) n *= d.size[i];
  return n;
}

}  // namespace

void launch_reduce_rows(ReduceOp op, ElementType xt, const void* x, ElementType yt, void* y, int64_t rows,
                        int64_t cols, int64_t chunk, cudaStream_t stream) {
  FSDPC_CHECK(rows >= 0 && cols >= 1 && chunk >= 1) << "rows " << rows << " cols " << cols << " chunk " << chunk;
  const int64_t chunks = (cols + chunk - 1) / chunk;
  const Launch l = launch_rows(rows * chunks, std::min(chunk, cols));
  if (l.grid == 0) return;
  with_types(xt, yt, [&](auto x_tag, auto y_tag) {
    using In = decltype(x_tag);
    using Out = decltype(y_tag);
    rows_kernel<In, Out, RowMap><<<l.grid, l.block, 0, stream>>>(op, static_cast<const In*>(x), static_cast<Out*>(y),
                                                                  rows, cols, chunk, RowMap{cols});
    FSDPC_CUDA_CHECK_LAUNCH();
  });
}

void launch_reduce_columns(ReduceOp op, ElementType xt, const void* x, ElementType yt, void* y, int64_t outer,
                           int64_t reduced, int64_t inner, int64_t chunk, cudaStream_t stream) {
  FSDPC_CHECK(outer >= 0 && reduced >= 1 && inner >= 0 && chunk >= 1)
      << "outer " << outer << " reduced " << reduced << " inner " << inner << " chunk " << chunk;
  constexpr int kBlock = kColumnWarps * kWarp;
  const int64_t tasks = outer * ((reduced + chunk - 1) / chunk) * ((inner + kWarp - 1) / kWarp);
  const Launch l = launch_1d(tasks * kBlock, kBlock);  // one block per task, capped
  if (l.grid == 0) return;
  with_types(xt, yt, [&](auto x_tag, auto y_tag) {
    using In = decltype(x_tag);
    using Out = decltype(y_tag);
    columns_kernel<In, Out><<<l.grid, l.block, 0, stream>>>(op, static_cast<const In*>(x), static_cast<Out*>(y), outer,
                                                             reduced, inner, chunk);
    FSDPC_CUDA_CHECK_LAUNCH();
  });
}

void launch_reduce_threads(ReduceOp op, ElementType xt, const void* x, ElementType yt, void* y, int64_t outer,
                           int64_t reduced, int64_t inner, cudaStream_t stream) {
  FSDPC_CHECK(outer >= 0 && reduced >= 0 && inner >= 0)
      << "outer " << outer << " reduced " << reduced << " inner " << inner;
  const Launch l = launch_1d(outer * inner);
  if (l.grid == 0) return;
  with_types(xt, yt, [&](auto x_tag, auto y_tag) {
    using In = decltype(x_tag);
    using Out = decltype(y_tag);
    threads_kernel<In, Out><<<l.grid, l.block, 0, stream>>>(op, static_cast<const In*>(x), static_cast<Out*>(y), outer,
                                                             reduced, inner);
    FSDPC_CUDA_CHECK_LAUNCH();
  });
}

void launch_reduce_strided(ReduceOp op, ElementType xt, const void* x, ElementType yt, void* y,
                           const StridedDims& kept, const StridedDims& reduced, int64_t chunk, cudaStream_t stream) {
  const int64_t rows = numel_of(kept), cols = numel_of(reduced);
  FSDPC_CHECK(cols >= 1 && chunk >= 1) << "cols " << cols << " chunk " << chunk;
  const int64_t chunks = (cols + chunk - 1) / chunk;
  const Launch l = launch_rows(rows * chunks, std::min(chunk, cols));
  if (l.grid == 0) return;
  with_types(xt, yt, [&](auto x_tag, auto y_tag) {
    using In = decltype(x_tag);
    using Out = decltype(y_tag);
    rows_kernel<In, Out, StridedMap><<<l.grid, l.block, 0, stream>>>(
        op, static_cast<const In*>(x), static_cast<Out*>(y), rows, cols, chunk, StridedMap{kept, reduced});
    FSDPC_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace fsdpc::cuda
