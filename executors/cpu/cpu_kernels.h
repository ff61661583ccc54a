// Private to executors/cpu/: the kernels by family (one .cpp each), the dtype
// dispatch and the small helpers they share. Free of oneDNN (cpu_dnnl.h).
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <vector>

#include "executors/bf16.h"
#include "executors/cpu/cpu_executor.h"
#include "executors/executor.h"
#include "executors/strided.h"
#include "ir/error.h"

namespace fsdpc::cpu {

using Views = std::vector<TensorView>;

// Every kernel has KernelFn's signature.
#define FSDPC_CPU_KERNEL(name)                                                              \
  void name([[maybe_unused]] KernelContext& ctx, [[maybe_unused]] const BoundSymbol& b, \
            [[maybe_unused]] const Views& in, [[maybe_unused]] const Views& out)

// cpu_elementwise.cpp
FSDPC_CPU_KERNEL(unary_kernel);  // neg exp log tanh sqrt rsqrt sin cos
FSDPC_CPU_KERNEL(convert_kernel);
FSDPC_CPU_KERNEL(binary_kernel);   // add sub mul div pow maximum
FSDPC_CPU_KERNEL(compare_kernel);  // eq ne lt le gt ge
FSDPC_CPU_KERNEL(where_kernel);
// cpu_scalar_expr.cpp: an elementwise op without a kernel above, run from its
// scalar expression (for the dtypes of runs_generated(), ir/scalar_expr.h).
FSDPC_CPU_KERNEL(expr_kernel);
// cpu_reduce.cpp
FSDPC_CPU_KERNEL(reduce_kernel);  // sum amax
// cpu_shape.cpp
FSDPC_CPU_KERNEL(reshape_kernel);
FSDPC_CPU_KERNEL(permute_kernel);
FSDPC_CPU_KERNEL(broadcast_in_dim_kernel);
FSDPC_CPU_KERNEL(slice_kernel);
FSDPC_CPU_KERNEL(pad_kernel);
FSDPC_CPU_KERNEL(cat_kernel);
FSDPC_CPU_KERNEL(full_kernel);
FSDPC_CPU_KERNEL(iota_kernel);
FSDPC_CPU_KERNEL(pack_kernel);
FSDPC_CPU_KERNEL(unpack_kernel);
// cpu_quantize.cpp
FSDPC_CPU_KERNEL(quantize_kernel);
FSDPC_CPU_KERNEL(dequantize_kernel);
// cpu_index.cpp
FSDPC_CPU_KERNEL(take_kernel);
FSDPC_CPU_KERNEL(index_add_kernel);
// cpu_matmul.cpp
FSDPC_CPU_KERNEL(matmul_kernel);
FSDPC_CPU_KERNEL(linear_kernel);
// cpu_nn.cpp
FSDPC_CPU_KERNEL(gelu_kernel);
FSDPC_CPU_KERNEL(softmax_kernel);
FSDPC_CPU_KERNEL(layer_norm_kernel);
FSDPC_CPU_KERNEL(cross_entropy_kernel);
FSDPC_CPU_KERNEL(silu_kernel);
FSDPC_CPU_KERNEL(rms_norm_kernel);
// cross_entropy's pieces the fused head shares: the targets, each checked
// against `classes` (a message naming b's op), and each row's loss
// logsumexp(z) - z[target] of f32 logits [rows, v], in double.
std::vector<int64_t> checked_targets(const BoundSymbol& b, const TensorView& t, int64_t classes);
void row_losses(const float* logits, const int64_t* targets, int64_t rows, int64_t v, double* losses);
// A row's max (-inf for none) and its sum in double, in lanes.
float row_max(const float* z, int64_t n);
double row_sum(const float* p, int64_t n);
// cpu_linear_cross_entropy.cpp and cpu_linear_cross_entropy_stats.cpp
// (the chunks they share: cpu_head.h)
FSDPC_CPU_KERNEL(linear_cross_entropy_kernel);
FSDPC_CPU_KERNEL(linear_cross_entropy_grad_kernel);
FSDPC_CPU_KERNEL(linear_cross_entropy_with_grad_kernel);
FSDPC_CPU_KERNEL(linear_cross_entropy_stats_kernel);
FSDPC_CPU_KERNEL(linear_cross_entropy_stats_grad_kernel);
// cpu_attention.cpp
FSDPC_CPU_KERNEL(sdpa_kernel);
FSDPC_CPU_KERNEL(sdpa_grad_kernel);

// Hot loops are also compiled for AVX-512 and AVX2, the variant picked when
// the program loads (function multiversioning), so the build stays portable
// and baseline -O3 code (SSE2) is not all a modern core gets.
#if defined(__x86_64__) && defined(__GNUC__) && defined(__ELF__)
#define FSDPC_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FSDPC_CPU_CLONES
#endif

// A loop over at least kParallelMin elements splits over the rank's threads
// (cpu_threads()) in equal static chunks; below it a parallel region, a few
// microseconds, costs more than it saves. Each iteration must write its own
// outputs and read nothing another writes, so results do not depend on the
// thread count. (-fopenmp on the file, else the pragma is ignored.)
constexpr int64_t kParallelMin = int64_t{1} << 15;
#define FSDPC_CPU_PRAGMA(x) _Pragma(#x)
#define FSDPC_CPU_PARALLEL_FOR(n)                                                    \
  FSDPC_CPU_PRAGMA(omp parallel for schedule(static) num_threads(::fsdpc::cpu_threads()) \
                       if ((n) >= ::fsdpc::cpu::kParallelMin))

// The dtypes the CPU kernels hold: bool is one byte (0 or 1) seen as uint8_t,
// bf16 the upper half of an f32 (Bf16 below).
bool is_cpu_dtype(DType d);

// A bf16 element as the kernels that only move or select values see it:
// widened to float exactly, narrowed by rounding to nearest even
// (executors/bf16.h). Arithmetic on it would round after every operation;
// the kernels that compute run on f32 copies instead (in_f32 below).
struct Bf16 {
  uint16_t bits = 0;
  Bf16() = default;
  template <class T>
    requires std::is_arithmetic_v<T>
  explicit Bf16(T x) : bits(f32_to_bf16(static_cast<float>(x))) {}
  explicit operator float() const { return bf16_to_f32(bits); }
  friend bool operator==(Bf16 a, Bf16 b) { return float(a) == float(b); }
  friend auto operator<=>(Bf16 a, Bf16 b) { return float(a) <=> float(b); }
};
static_assert(sizeof(Bf16) == 2);

inline const Shape& shape_of(const TensorView& v) { return v.type->shape; }
inline int64_t count_of(const TensorView& v) { return numel(v.type->shape); }
template <class T>
const T* cdata(const TensorView& v) {
  return static_cast<const T*>(v.data);
}
template <class T>
T* mdata(const TensorView& v) {
  return static_cast<T*>(v.data);
}


// Product of shape[begin, end).
int64_t prod(const Shape& shape, size_t begin, size_t end);

// A value converted as the IR converts: to bool is "nonzero", from bool is
// 0/1, floating to integer truncates toward zero.
template <class To, class From>
To convert_value(From x) {
  if constexpr (std::is_same_v<From, Bf16>)
    return convert_value<To>(static_cast<float>(x));  // exact, then as from f32
  else if constexpr (std::is_same_v<To, Bf16> && std::is_same_v<From, uint8_t>)
    return Bf16(x != 0 ? 1.0f : 0.0f);
  else if constexpr (std::is_same_v<To, Bf16>)
    return Bf16(static_cast<float>(x));  // an integer or f64 rounds once, via f32, as torch's .to(bfloat16)
  else if constexpr (std::is_same_v<To, uint8_t>)
    return static_cast<uint8_t>(x != From(0));
  else if constexpr (std::is_same_v<From, uint8_t>)
    return static_cast<To>(x != 0 ? 1 : 0);
  else
    return static_cast<To>(x);
}

// Calls f(T{}) with T the C++ type of dtype `d`; a dtype the CPU does not
// hold (f16) is a user-facing error naming the op and `what`.
template <class F>
decltype(auto) visit_dtype(const BoundSymbol& b, const char* what, DType d, F&& f) {
  switch (d) {
    case DType::f32: return f(float{});
    case DType::f64: return f(double{});
    case DType::i32: return f(int32_t{});
    case DType::i8: return f(int8_t{});
    case DType::i64: return f(int64_t{});
    case DType::boolean: return f(uint8_t{});
    case DType::bf16: return f(Bf16{});
    default: break;
  }
  fail("cpu_", op_name(b.op), ": ", what, " has dtype ", dtype_name(d),
       ", which the CPU executor does not support (f32, bf16, f64, i32, i64, i8, bool)");
}

// n values converted between f32 and bf16 (cpu_bf16.cpp): vectorised, over
// the rank's threads when large, each element as executors/bf16.h does it.
void widen_bf16(const uint16_t* x, float* y, int64_t n);
void narrow_to_bf16(const float* x, uint16_t* y, int64_t n);

// Calls f on f32 views of `in` and `out`: bf16 inputs widened into f32
// copies, bf16 outputs computed into f32 buffers and rounded once into
// them, as a CUDA kernel loads bf16, computes in float and stores bf16.
// Without a bf16 operand, f gets the views themselves.
void run_in_f32(const Views& in, const Views& out, const std::function<void(const Views&, const Views&)>& f);

// Whether any of the views holds bf16.
inline bool any_bf16(const Views& in, const Views& out) {
  for (const Views* vs : {&in, &out})
    for (const TensorView& v : *vs)
      if (v.type && v.type->dtype == DType::bf16) return true;
  return false;
}

// Kernel K, which computes in f32, run through run_in_f32 when an operand is
// bf16, and called directly otherwise (the f32 step's path stays a call).
// The kernels that hold bf16 themselves (the oneDNN products, conversions,
// data movement) are not wrapped; the products call run_in_f32 themselves
// on a CPU for which oneDNN has no bf16 kernel (bf16_products_native(),
// cpu_dnnl.h).
template <KernelFn K>
FSDPC_CPU_KERNEL(in_f32) {
  if (!any_bf16(in, out)) return K(ctx, b, in, out);
  run_in_f32(in, out, [&](const Views& in32, const Views& out32) { K(ctx, b, in32, out32); });
}

// Checks that a kernel's tensor is f32 (what claims() cannot see: input dtypes).
void require_f32(const BoundSymbol& b, const TensorView& v, const char* what);

// The one dtype, f32 or bf16, of a product's operands and result (oneDNN's
// products take both in one precision); named, what, in a mismatch.
struct NamedView {
  const TensorView& v;
  const char* what;
};
DType product_dtype(const BoundSymbol& b, std::initializer_list<NamedView> views);

// Walks over two strided buffers (executors/strided.h).
using Dim = StridedDim;

// Calls f(src_offset, dst_offset) for every index of dims[0, outer), the
// last of them fastest.
template <class F>
void for_each_outer(const std::vector<Dim>& dims, size_t outer, F&& f) {
  if (outer == 0) return f(0, 0);
  std::vector<int64_t> index(outer, 0);
  int64_t s = 0, o = 0;
  while (true) {
    f(s, o);
    int64_t d = static_cast<int64_t>(outer) - 1;
    for (; d >= 0; --d) {
      s += dims[d].src;
      o += dims[d].dst;
      if (++index[d] < dims[d].size) break;
      s -= dims[d].src * dims[d].size;
      o -= dims[d].dst * dims[d].size;
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

// Copies `shape` elements of `elem_size` bytes from src (strides ss, in
// elements) to dst (strides ds). Every data-movement op is one call; dims
// are coalesced first, and a transpose of the two innermost dims is tiled.
void strided_copy(const void* src, const Strides& ss, void* dst, const Strides& ds, const Shape& shape,
                  int64_t elem_size);

// A per-thread scratch buffer of at least n floats, reused across calls so a
// training step does not fault in fresh pages. `slot` (0-2) tells buffers
// that are live at once apart: 0 kernels' own, 1 attention's scores, 2 a
// gemm's packed right operand.
float* scratch_floats(int64_t n, int slot);

}  // namespace fsdpc::cpu
