// Device helpers the kernel .cu files share: the rows a warp or block walks,
// f32 conversions of the stored float types, and warp and block reductions
// of a small value under a merge rule the caller supplies (each kernel keeps
// its own rule: softmax's online max and sum, layer_norm's sums, and so on).
// Only .cu files include it: it holds device code and __shared__ memory,
// which host .cpp files cannot compile.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <type_traits>

#include "executors/cuda/launch.h"

namespace fsdpc::cuda {

inline constexpr unsigned kFullMask = 0xffffffffu;

// A stored value as f32, and an f32 result rounded (to nearest even) to the
// stored type; __host__ too, as elementwise.cu's __host__ __device__
// conversions call them.
__host__ __device__ __forceinline__ float to_f32(float v) { return v; }
__host__ __device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__host__ __device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }

template <class T>
__host__ __device__ __forceinline__ T from_f32(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16(v);
  } else {
    static_assert(std::is_same_v<T, __half>, "from_f32: float, bf16 or f16 only");
    return __float2half(v);
  }
}

// Lane (lane ^ lane_mask)'s v, shuffled a 32-bit word at a time over the
// full warp: every lane must call it. T is trivially copyable, a whole
// number of words (float, double, a struct of them).
template <class T>
__device__ __forceinline__ T shfl_xor(T v, int lane_mask) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) % sizeof(unsigned) == 0,
                "shfl_xor: T must be trivially copyable 32-bit words");
  unsigned words[sizeof(T) / sizeof(unsigned)];
  memcpy(words, &v, sizeof v);
#pragma unroll
  for (unsigned& w : words) w = __shfl_xor_sync(kFullMask, w, lane_mask);
  memcpy(&v, words, sizeof v);
  return v;
}

// Butterfly over the full warp: every lane must call it. Each step is
// v = merge(v, partner's v), so lane 0 folds in the fixed order of a
// shuffle-down tree, and a merge symmetric bit for bit leaves every lane
// with the same result.
template <class T, class Merge>
__device__ __forceinline__ T warp_reduce(T v, Merge merge) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o /= 2) v = merge(v, shfl_xor(v, o));
  return v;
}

// Every thread of the block must call it (it synchronises); every thread
// gets the block's result. blockDim.x is a multiple of the warp size, at
// most kMaxBlock. Each warp's result goes through shared memory, then every
// warp reduces those, its lanes past the last warp holding `identity`
// (merge(x, identity) == x). T lives in __shared__ memory: no member
// initializers or constructors. Calls with the same T and Merge share the
// buffer, hence the first __syncthreads.
template <class T, class Merge>
__device__ T block_reduce(T v, Merge merge, T identity) {
  __shared__ T partial[kMaxBlock / kWarp];
  v = warp_reduce(v, merge);
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  __syncthreads();  // readers of the previous call's partials are done
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x) / kWarp ? partial[lane] : identity;
  return warp_reduce(v, merge);
}

// The rows a thread's group (a warp per row when kWarpRows, else a block
// per row) walks: the first, the step between them, and the thread's place
// and count in its group. Row loops over it are uniform across the group,
// so every member reaches each reduction.
struct RowCursor {
  int64_t first, step;
  int rank, size;
};

template <bool kWarpRows>
__device__ __forceinline__ RowCursor row_cursor() {
  if constexpr (kWarpRows) {
    const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    return {t / kWarp, static_cast<int64_t>(gridDim.x) * blockDim.x / kWarp,
            static_cast<int>(threadIdx.x) % kWarp, kWarp};
  } else {
    return {blockIdx.x, gridDim.x, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
  }
}

}  // namespace fsdpc::cuda
