// Launch functions of the data-movement kernels (kernels/copy.cu): one
// strided copy behind permute, broadcast_in_dim, slice, pad and cat, a fill
// and an iota. Plain pointers, sizes and POD descriptors only; the plans
// that build the descriptors are in executors/cuda/copy_plan.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fsdpc::cuda {

// Dims a strided copy walks at most after coalescing; copy_plan splits a
// walk with more into several launches.
constexpr int kMaxCopyDims = 8;

// A walk over `rank` dims, outermost first, the last fastest: element
// (c0, ..., c{rank-1}) is read at sum(c_k * src[k]) and written at
// sum(c_k * dst[k]), in elements of the launch's element size. rank 0 is
// one element. Passed by value as a kernel argument (200 bytes).
struct CopyDesc {
  int32_t rank = 0;
  int64_t size[kMaxCopyDims] = {};
  int64_t src[kMaxCopyDims] = {};
  int64_t dst[kMaxCopyDims] = {};
};

// Copies the walk `d` from src to dst. elem_size is 1, 2, 4, 8 or 16
// bytes (16: widened by copy_plan's widen()); strides are non-negative and
// the buffers do not overlap. Nothing is launched for an empty walk.
void launch_strided_copy(const void* src, void* dst, const CopyDesc& d, int elem_size, cudaStream_t stream);

// Writes n elements of elem_size bytes (1, 2, 4 or 8), each the low
// elem_size bytes of `pattern` (little-endian, as the GPU stores them).
void launch_fill(void* dst, int64_t n, int elem_size, uint64_t pattern, cudaStream_t stream);

// The element types iota writes.
enum class IotaType : int32_t { f32, f16, bf16, f64, i32, i64 };

// dst[i] = i converted to `type` (round to nearest for floats), i < n.
void launch_iota(void* dst, int64_t n, IotaType type, cudaStream_t stream);

}  // namespace fsdpc::cuda
