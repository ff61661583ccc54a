// quantize: one thread block per quantization block (its largest magnitude
// is a block reduction, then each thread codes its strided values; thread 0
// writes the scale's bytes, which need not be 4-byte aligned). dequantize:
// a grid-stride loop over the values, each reading its block's scale.
#include "executors/cuda/kernels/quantize.h"

#include "executors/cuda/cuda_check.h"
#include "executors/cuda/kernels/device_util.cuh"
#include "executors/cuda/launch.h"
#include "ir/quantize.h"

namespace fsdpc::cuda {

namespace {

struct MaxOf {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <class T>
__global__ void quantize_blocks(const T* __restrict__ x, int8_t* __restrict__ q, int64_t rows, int64_t n,
                                int64_t block) {
  const int64_t per_row = (n + block - 1) / block, bytes = n + 4 * per_row;
  for (int64_t k = blockIdx.x; k < rows * per_row; k += gridDim.x) {
    const int64_t row = k / per_row, j = k % per_row, begin = j * block;
    const int64_t size = min(block, n - begin);
    const T* xb = x + row * n + begin;
    float amax = 0.f, nonfinite = 0.f;
    for (int64_t i = threadIdx.x; i < size; i += blockDim.x) {
      const float v = to_f32(xb[i]);
      amax = fmaxf(amax, fabsf(v));
      if (!isfinite(v)) nonfinite = 1.f;
    }
    amax = block_reduce(amax, MaxOf{}, 0.f);
    nonfinite = block_reduce(nonfinite, MaxOf{}, 0.f);
    // Rounded toward zero, as ir/quantize.h's quantize_scale.
    const float s = nonfinite != 0.f ? __int_as_float(0x7fc00000) : __fdiv_rz(amax, float(kQuantLevels));
    int8_t* out = q + row * bytes;
    for (int64_t i = threadIdx.x; i < size; i += blockDim.x) {
      const float c = s > 0.f ? rintf(to_f32(xb[i]) / s) : 0.f;
      out[begin + i] = static_cast<int8_t>(fminf(fmaxf(c, -float(kQuantLevels)), float(kQuantLevels)));
    }
    if (threadIdx.x == 0) {
      const unsigned bits = __float_as_uint(s);
      for (int b = 0; b < 4; ++b) out[n + 4 * j + b] = static_cast<int8_t>((bits >> (8 * b)) & 0xffu);
    }
  }
}

template <class T>
__global__ void dequantize_values(const int8_t* __restrict__ q, T* __restrict__ y, int64_t rows, int64_t n,
                                  int64_t block) {
  const int64_t per_row = (n + block - 1) / block, bytes = n + 4 * per_row;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < rows * n; e += stride) {
    const int64_t row = e / n, i = e % n;
    const int8_t* in = q + row * bytes;
    const unsigned char* sb = reinterpret_cast<const unsigned char*>(in + n + 4 * (i / block));
    const unsigned bits = sb[0] | (sb[1] << 8) | (sb[2] << 16) | (static_cast<unsigned>(sb[3]) << 24);
    y[e] = from_f32<T>(static_cast<float>(in[i]) * __uint_as_float(bits));
  }
}

template <class T>
void quantize(const T* x, int8_t* q, int64_t rows, int64_t n, int64_t block, cudaStream_t stream) {
  const int64_t count = n == 0 ? 0 : rows * ((n + block - 1) / block);
  const Launch l = launch_rows(count, block);
  if (l.grid == 0) return;
  quantize_blocks<T><<<l.grid, l.block, 0, stream>>>(x, q, rows, n, block);
  FSDPC_CUDA_CHECK_LAUNCH();
}

template <class T>
void dequantize(const int8_t* q, T* y, int64_t rows, int64_t n, int64_t block, cudaStream_t stream) {
  const Launch l = launch_1d(rows * n);
  if (l.grid == 0) return;
  dequantize_values<T><<<l.grid, l.block, 0, stream>>>(q, y, rows, n, block);
  FSDPC_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_quantize(const float* x, int8_t* q, int64_t rows, int64_t n, int64_t block, cudaStream_t stream) {
  quantize(x, q, rows, n, block, stream);
}
void launch_quantize(const __nv_bfloat16* x, int8_t* q, int64_t rows, int64_t n, int64_t block,
                     cudaStream_t stream) {
  quantize(x, q, rows, n, block, stream);
}
void launch_dequantize(const int8_t* q, float* y, int64_t rows, int64_t n, int64_t block, cudaStream_t stream) {
  dequantize(q, y, rows, n, block, stream);
}
void launch_dequantize(const int8_t* q, __nv_bfloat16* y, int64_t rows, int64_t n, int64_t block,
                       cudaStream_t stream) {
  dequantize(q, y, rows, n, block, stream);
}

}  // namespace fsdpc::cuda
