// quantize and dequantize: ir/quantize.h's int8 rows. A block is read twice,
// once for its largest magnitude and once to code it; blocks are independent,
// so a large tensor splits over the rank's threads by block. x may be f32 or
// bf16 (widened exactly); codes and scales are computed in f32.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "executors/cpu/cpu_kernels.h"
#include "ir/quantize.h"

namespace fsdpc::cpu {

static_assert(std::endian::native == std::endian::little, "the int8 format stores its f32 scales little-endian");

namespace {

float widen(float x) { return x; }
float widen(uint16_t x) { return bf16_to_f32(x); }

// One block's codes and scale; false if it holds NaN or an infinity.
template <class T>
bool quantize_block(const T* x, int64_t n, int8_t* codes, char* scale_bytes) {
  float amax = 0, nonfinite = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = widen(x[i]);
    amax = std::max(amax, std::fabs(v));
    nonfinite += v - v;  // 0 for a finite v, NaN otherwise
  }
  if (nonfinite != 0 || std::isnan(nonfinite)) return false;
  const float s = quantize_scale(amax);
  std::memcpy(scale_bytes, &s, sizeof s);
  if (s == 0) {  // zeros, or a block so small its scale underflows
    std::memset(codes, 0, n);
    return true;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float c = std::nearbyint(widen(x[i]) / s);
    codes[i] = static_cast<int8_t>(std::clamp(c, -float{kQuantLevels}, float{kQuantLevels}));
  }
  return true;
}

template <class T>
void dequantize_block(const int8_t* codes, int64_t n, const char* scale_bytes, T* y) {
  float s;
  std::memcpy(&s, scale_bytes, sizeof s);
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(codes[i]) * s;
    if constexpr (std::is_same_v<T, uint16_t>)
      y[i] = f32_to_bf16(v);
    else
      y[i] = v;
  }
}

// The rows and blocks of a [..., n] tensor quantized in blocks of `block`.
struct Blocks {
  int64_t rows, n, block, per_row;
  int64_t bytes() const { return quantized_row_bytes(n, block); }
  int64_t count() const { return rows * per_row; }
  int64_t begin(int64_t k) const { return (k % per_row) * block; }
  int64_t size(int64_t k) const { return std::min(block, n - begin(k)); }
};

Blocks blocks_of(const Shape& values, int64_t block) {
  const int64_t n = values.back();
  return Blocks{numel(values) / std::max<int64_t>(n, 1), n, block, (n + block - 1) / block};
}

template <class T>
int64_t quantize_rows(const T* x, const Blocks& g, int8_t* q) {
  int64_t bad = -1;
  FSDPC_CPU_PRAGMA(omp parallel for schedule(static) num_threads(::fsdpc::cpu_threads()) reduction(max : bad) \
                       if (g.rows * g.n >= kParallelMin))
  for (int64_t k = 0; k < g.count(); ++k) {
    const int64_t row = k / g.per_row, j = k % g.per_row;
    int8_t* out = q + row * g.bytes();
    if (!quantize_block(x + row * g.n + g.begin(k), g.size(k), out + g.begin(k),
                        reinterpret_cast<char*>(out + g.n + 4 * j)))
      bad = std::max(bad, k);
  }
  return bad;
}

template <class T>
void dequantize_rows(const int8_t* q, const Blocks& g, T* y) {
  FSDPC_CPU_PRAGMA(omp parallel for schedule(static) num_threads(::fsdpc::cpu_threads()) \
                       if (g.rows * g.n >= kParallelMin))
  for (int64_t k = 0; k < g.count(); ++k) {
    const int64_t row = k / g.per_row, j = k % g.per_row;
    const int8_t* in = q + row * g.bytes();
    dequantize_block(in + g.begin(k), g.size(k), reinterpret_cast<const char*>(in + g.n + 4 * j),
                     y + row * g.n + g.begin(k));
  }
}

}  // namespace

FSDPC_CPU_KERNEL(quantize_kernel) {
  const TensorView& x = in[0];
  const Blocks g = blocks_of(shape_of(x), b.attrs.get_int("block"));
  int8_t* q = mdata<int8_t>(out[0]);
  int64_t bad = -1;
  if (x.type->dtype == DType::f32)
    bad = quantize_rows(cdata<float>(x), g, q);
  else if (x.type->dtype == DType::bf16)
    bad = quantize_rows(cdata<uint16_t>(x), g, q);
  else
    fail("cpu_quantize: x is ", dtype_name(x.type->dtype), shape_str(shape_of(x)), "; expected f32 or bf16");
  if (bad >= 0)
    fail("cpu_quantize: ", b.inputs[0].name, " (", dtype_name(x.type->dtype), shape_str(shape_of(x)),
         ") holds NaN or an infinity in row ", bad / g.per_row, ", values [", g.begin(bad), ", ",
         g.begin(bad) + g.size(bad), "); int8 codes only finite values");
}

FSDPC_CPU_KERNEL(dequantize_kernel) {
  const TensorView& y = out[0];
  const Blocks g = blocks_of(shape_of(y), b.attrs.get_int("block"));
  if (in[0].type->dtype != DType::i8)
    fail("cpu_dequantize: q is ", dtype_name(in[0].type->dtype), shape_str(shape_of(in[0])), "; expected i8");
  const int8_t* q = cdata<int8_t>(in[0]);
  if (y.type->dtype == DType::f32)
    dequantize_rows(q, g, mdata<float>(y));
  else
    dequantize_rows(q, g, mdata<uint16_t>(y));
}

}  // namespace fsdpc::cpu
