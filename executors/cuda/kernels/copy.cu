// Device code of the data-movement kernels (copy.h): the strided copy that
// permute, broadcast_in_dim, slice, pad and cat share, a fill and an iota.
// Data movement is byte-generic: elements are moved as unsigned integers of
// their size (uint4 for the 16-byte units copy_plan's widen() makes).
#include "executors/cuda/kernels/copy.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>

#include "executors/cuda/cuda_check.h"
#include "executors/cuda/launch.h"

namespace fsdpc::cuda {

namespace {

// Thread i of the grid-stride loop copies the i-th element of the walk in
// row-major order of d's dims, so consecutive threads write consecutive
// destination elements when the output is the contiguous side (every op
// but pad's interior copy). I is uint32_t when every index and offset fits
// in 31 bits (integer division is several times cheaper), else int64_t.
template <class T, class I>
__global__ void strided_copy_kernel(const T* __restrict__ src, T* __restrict__ dst, const CopyDesc d, I n) {
  const I step = static_cast<I>(gridDim.x) * static_cast<I>(blockDim.x);
  for (I i = static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + static_cast<I>(threadIdx.x); i < n;
       i += step) {
    I rest = i, s = 0, o = 0;
    for (int k = d.rank - 1; k >= 0; --k) {
      const I size = static_cast<I>(d.size[k]);
      const I c = rest % size;
      rest /= size;
      s += c * static_cast<I>(d.src[k]);
      o += c * static_cast<I>(d.dst[k]);
    }
    dst[o] = src[s];
  }
}

template <class T>
__global__ void fill_kernel(T* __restrict__ dst, const T value, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) dst[i] = value;
}

// i converted as static_cast would on the CPU; f16 and bf16 round once,
// straight from the integer.
__device__ inline void store_index(float* p, long long i) { *p = static_cast<float>(i); }
__device__ inline void store_index(double* p, long long i) { *p = static_cast<double>(i); }
__device__ inline void store_index(__half* p, long long i) { *p = __ll2half_rn(i); }
__device__ inline void store_index(__nv_bfloat16* p, long long i) { *p = __ll2bfloat16_rn(i); }
__device__ inline void store_index(int32_t* p, long long i) { *p = static_cast<int32_t>(i); }
__device__ inline void store_index(int64_t* p, long long i) { *p = static_cast<int64_t>(i); }

template <class T>
__global__ void iota_kernel(T* __restrict__ dst, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    store_index(dst + i, static_cast<long long>(i));
}

// Whether the walk's element count and every offset it reaches fit in a
// non-negative int32 (so i + step cannot wrap a uint32 either: step is at
// most kMaxGrid * kMaxBlock, far below 2^31).
bool fits_32bit(const CopyDesc& d, int64_t n) {
  if (n > INT32_MAX) return false;
  int64_t s = 0, o = 0;
  for (int k = 0; k < d.rank; ++k) {
    s += (d.size[k] - 1) * d.src[k];
    o += (d.size[k] - 1) * d.dst[k];
  }
  return s <= INT32_MAX && o <= INT32_MAX;
}

template <class T>
void copy_as(const void* src, void* dst, const CopyDesc& d, int64_t n, cudaStream_t stream) {
  const Launch l = launch_1d(n);
  const T* s = static_cast<const T*>(src);
  T* o = static_cast<T*>(dst);
  if (fits_32bit(d, n))
    strided_copy_kernel<T, uint32_t><<<l.grid, l.block, 0, stream>>>(s, o, d, static_cast<uint32_t>(n));
  else
    strided_copy_kernel<T, int64_t><<<l.grid, l.block, 0, stream>>>(s, o, d, n);
  FSDPC_CUDA_CHECK_LAUNCH();
}

template <class T>
void fill_as(void* dst, int64_t n, uint64_t pattern, cudaStream_t stream) {
  const Launch l = launch_1d(n);
  fill_kernel<T><<<l.grid, l.block, 0, stream>>>(static_cast<T*>(dst), static_cast<T>(pattern), n);
  FSDPC_CUDA_CHECK_LAUNCH();
}

template <class T>
void iota_as(void* dst, int64_t n, cudaStream_t stream) {
  const Launch l = launch_1d(n);
  iota_kernel<T><<<l.grid, l.block, 0, stream>>>(static_cast<T*>(dst), n);
  FSDPC_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_strided_copy(const void* src, void* dst, const CopyDesc& d, int elem_size, cudaStream_t stream) {
  FSDPC_CHECK(d.rank >= 0 && d.rank <= kMaxCopyDims) << "copy walk of rank " << d.rank;
  int64_t n = 1;
  for (int k = 0; k < d.rank; ++k) {
    FSDPC_CHECK(d.size[k] >= 0 && d.src[k] >= 0 && d.dst[k] >= 0) << "negative size or stride in a copy walk";
    n *= d.size[k];
  }
  if (n == 0) return;
  switch (elem_size) {
    case 1: return copy_as<uint8_t>(src, dst, d, n, stream);
    case 2: return copy_as<uint16_t>(src, dst, d, n, stream);
    case 4: return copy_as<uint32_t>(src, dst, d, n, stream);
    case 8: return copy_as<unsigned long long>(src, dst, d, n, stream);
    case 16: return copy_as<uint4>(src, dst, d, n, stream);
    default: break;
  }
  FSDPC_CHECK(false) << "strided copy of " << elem_size << "-byte elements";
}

void launch_fill(void* dst, int64_t n, int elem_size, uint64_t pattern, cudaStream_t stream) {
  FSDPC_CHECK(elem_size == 1 || elem_size == 2 || elem_size == 4 || elem_size == 8)
      << "fill of " << elem_size << "-byte elements";
  if (n <= 0) return;
  if (elem_size < 8) pattern &= (uint64_t{1} << (8 * elem_size)) - 1;
  const uint64_t bytes = static_cast<uint64_t>(n) * static_cast<uint64_t>(elem_size);
  // Zeros (the common case), all-ones and the like: one memset.
  bool uniform = true;
  for (int b = 1; b < elem_size; ++b) uniform = uniform && ((pattern >> (8 * b)) & 0xff) == (pattern & 0xff);
  if (uniform) {
    FSDPC_CUDA_CHECK(cudaMemsetAsync(dst, static_cast<int>(pattern & 0xff), bytes, stream));
    return;
  }
  // Narrow elements are written 8 bytes at a time when the run allows.
  if (elem_size < 8 && bytes % 8 == 0 && reinterpret_cast<uintptr_t>(dst) % 8 == 0) {
    for (int w = elem_size; w < 8; w *= 2) pattern |= pattern << (8 * w);
    elem_size = 8;
    n = static_cast<int64_t>(bytes / 8);
  }
  switch (elem_size) {
    case 1: return fill_as<uint8_t>(dst, n, pattern, stream);
    case 2: return fill_as<uint16_t>(dst, n, pattern, stream);
    case 4: return fill_as<uint32_t>(dst, n, pattern, stream);
    default: return fill_as<unsigned long long>(dst, n, pattern, stream);
  }
}

void launch_iota(void* dst, int64_t n, IotaType type, cudaStream_t stream) {
  if (n <= 0) return;
  switch (type) {
    case IotaType::f32: return iota_as<float>(dst, n, stream);
    case IotaType::f16: return iota_as<__half>(dst, n, stream);
    case IotaType::bf16: return iota_as<__nv_bfloat16>(dst, n, stream);
    case IotaType::f64: return iota_as<double>(dst, n, stream);
    case IotaType::i32: return iota_as<int32_t>(dst, n, stream);
    case IotaType::i64: return iota_as<int64_t>(dst, n, stream);
  }
  FSDPC_CHECK(false) << "iota of type " << static_cast<int>(type);
}

}  // namespace fsdpc::cuda
