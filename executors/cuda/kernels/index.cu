// Device code of take and index_add (index.h): one block per row of the
// result (take) or of the source (index_add), its threads striding over the
// row; out-of-range indices are skipped and recorded in a fault word.
#include "executors/cuda/kernels/index.h"

#include <cuda_bf16.h>

#include <climits>

#include "executors/cuda/cuda_check.h"
#include "executors/cuda/cuda_context.h"
#include "executors/cuda/launch.h"

namespace fsdpc::cuda {

namespace {

constexpr unsigned kTakeFault = 1, kIndexAddFault = 2;

// The per-device fault word; `first` is ULLONG_MAX while nothing is
// recorded, so atomicMin keeps the smallest bad position.
struct DeviceFaults {
  unsigned long long count;
  unsigned long long first;
  unsigned int ops;
};

__device__ DeviceFaults g_faults = {0, ULLONG_MAX, 0};

__device__ void record_fault(int64_t position, unsigned op) {
  atomicAdd(&g_faults.count, 1ull);
  atomicMin(&g_faults.first, static_cast<unsigned long long>(position));
  atomicOr(&g_faults.ops, op);
}

// Rows r = o * n + j of the [outer, n] grid of indexed rows; every block
// walks rows r, r + gridDim.x, ... Each position j is recorded once (at o
// == 0, by thread 0), so the count is of bad index positions, not rows.
template <class U, class Ix>
__global__ void take_kernel(const U* __restrict__ table, const Ix* __restrict__ idx, U* __restrict__ out,
                            int64_t total_rows, int64_t rows, int64_t n, int64_t units) {
  for (int64_t r = blockIdx.x; r < total_rows; r += gridDim.x) {
    const int64_t o = r / n, j = r - o * n;
    const int64_t v = static_cast<int64_t>(idx[j]);
    U* to = out + r * units;
    if (v < 0 || v >= rows) {
      if (threadIdx.x == 0 && o == 0) record_fault(j, kTakeFault);
      for (int64_t i = threadIdx.x; i < units; i += blockDim.x) to[i] = U{};
      continue;
    }
    const U* from = table + (o * rows + v) * units;
    for (int64_t i = threadIdx.x; i < units; i += blockDim.x) to[i] = from[i];
  }
}

__device__ inline void atomic_add(float* p, float v) { atomicAdd(p, v); }
// Native on sm_90, a compare-and-swap loop in cuda_bf16.hpp on sm_80.
__device__ inline void atomic_add(__nv_bfloat16* p, __nv_bfloat16 v) { atomicAdd(p, v); }
__device__ inline void atomic_add(int32_t* p, int32_t v) { atomicAdd(p, v); }
// Two's-complement addition is the same for signed and unsigned words.
__device__ inline void atomic_add(int64_t* p, int64_t v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}

template <class T, class Ix>
__global__ void index_add_kernel(T* __restrict__ out, const Ix* __restrict__ idx, const T* __restrict__ src,
                                 int64_t total_rows, int64_t rows, int64_t n, int64_t inner) {
  for (int64_t r = blockIdx.x; r < total_rows; r += gridDim.x) {
    const int64_t o = r / n, j = r - o * n;
    const int64_t v = static_cast<int64_t>(idx[j]);
    if (v < 0 || v >= rows) {
      if (threadIdx.x == 0 && o == 0) record_fault(j, kIndexAddFault);
      continue;
    }
    T* to = out + (o * rows + v) * inner;
    const T* from = src + r * inner;
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) atomic_add(to + i, from[i]);
  }
}

template <class U, class Ix>
void take_as(const void* table, const void* idx, void* out, int64_t outer, int64_t rows, int64_t n, int64_t units,
             cudaStream_t stream) {
  const Launch l = launch_rows(outer * n, units);
  if (l.grid == 0) return;
  take_kernel<U, Ix><<<l.grid, l.block, 0, stream>>>(static_cast<const U*>(table), static_cast<const Ix*>(idx),
                                                     static_cast<U*>(out), outer * n, rows, n, units);
  FSDPC_CUDA_CHECK_LAUNCH();
}

template <class U>
void take_unit(const void* table, const void* idx, IndexType it, void* out, int64_t outer, int64_t rows, int64_t n,
               int64_t units, cudaStream_t stream) {
  if (it == IndexType::i32)
    take_as<U, int32_t>(table, idx, out, outer, rows, n, units, stream);
  else
    take_as<U, int64_t>(table, idx, out, outer, rows, n, units, stream);
}

template <class T>
void index_add_as(void* out, const void* idx, IndexType it, const void* src, int64_t outer, int64_t rows, int64_t n,
                  int64_t inner, cudaStream_t stream) {
  const Launch l = launch_rows(outer * n, inner);
  if (l.grid == 0) return;
  T* o = static_cast<T*>(out);
  const T* s = static_cast<const T*>(src);
  if (it == IndexType::i32)
    index_add_kernel<T, int32_t><<<l.grid, l.block, 0, stream>>>(o, static_cast<const int32_t*>(idx), s, outer * n,
                                                                 rows, n, inner);
  else
    index_add_kernel<T, int64_t><<<l.grid, l.block, 0, stream>>>(o, static_cast<const int64_t*>(idx), s, outer * n,
                                                                 rows, n, inner);
  FSDPC_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_take(const void* table, const void* idx, IndexType index_type, void* out, int64_t outer, int64_t rows,
                 int64_t n, int64_t units, int unit_bytes, cudaStream_t stream) {
  FSDPC_CHECK(outer >= 0 && rows >= 0 && n >= 0 && units >= 0) << "take of a negative extent";
  if (outer == 0 || n == 0 || units == 0) return;
  switch (unit_bytes) {
    case 16: return take_unit<uint4>(table, idx, index_type, out, outer, rows, n, units, stream);
    case 8: return take_unit<unsigned long long>(table, idx, index_type, out, outer, rows, n, units, stream);
    case 4: return take_unit<uint32_t>(table, idx, index_type, out, outer, rows, n, units, stream);
    case 2: return take_unit<uint16_t>(table, idx, index_type, out, outer, rows, n, units, stream);
    case 1: return take_unit<uint8_t>(table, idx, index_type, out, outer, rows, n, units, stream);
    default: break;
  }
  FSDPC_CHECK(false) << "take of " << unit_bytes << "-byte units";
}

void launch_index_add(void* out, const void* idx, IndexType index_type, const void* src, AddType type,
                      int64_t outer, int64_t rows, int64_t n, int64_t inner, cudaStream_t stream) {
  FSDPC_CHECK(outer >= 0 && rows >= 0 && n >= 0 && inner >= 0) << "index_add of a negative extent";
  if (outer == 0 || n == 0 || inner == 0) return;
  switch (type) {
    case AddType::f32: return index_add_as<float>(out, idx, index_type, src, outer, rows, n, inner, stream);
    case AddType::bf16: return index_add_as<__nv_bfloat16>(out, idx, index_type, src, outer, rows, n, inner, stream);
    case AddType::i32: return index_add_as<int32_t>(out, idx, index_type, src, outer, rows, n, inner, stream);
    case AddType::i64: return index_add_as<int64_t>(out, idx, index_type, src, outer, rows, n, inner, stream);
  }
  FSDPC_CHECK(false) << "index_add of type " << static_cast<int>(type);
}

IndexFaults read_index_faults(CudaContext& ctx) {
  static const DeviceFaults kNoFaults = {0, ULLONG_MAX, 0};
  const cudaStream_t stream = ctx.compute();
  DeviceFaults seen = kNoFaults;
  FSDPC_CUDA_CHECK(cudaMemcpyFromSymbolAsync(&seen, g_faults, sizeof seen, 0, cudaMemcpyDeviceToHost, stream));
  FSDPC_CUDA_CHECK(cudaMemcpyToSymbolAsync(g_faults, &kNoFaults, sizeof kNoFaults, 0, cudaMemcpyHostToDevice, stream));
  ctx.wait_idle(CudaContext::Streams::compute, "the index fault word");
  IndexFaults faults;
  faults.count = seen.count;
  faults.first_position = seen.count > 0 ? seen.first : 0;
  faults.in_take = (seen.ops & kTakeFault) != 0;
  faults.in_index_add = (seen.ops & kIndexAddFault) != 0;
  return faults;
}

}  // namespace fsdpc::cuda
