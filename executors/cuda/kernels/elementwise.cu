// Device code of the elementwise ops (elementwise.h). Every op is one
// grid-stride kernel over a "body" that computes one element, or four
// through one vector load and store when every tensor is aligned for it;
// the op itself is a runtime switch, uniform across the grid, which costs
// nothing next to the memory traffic and keeps instantiations few.
#include "executors/cuda/kernels/elementwise.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "executors/cuda/cuda_check.h"
#include "executors/cuda/kernels/device_util.cuh"
#include "executors/cuda/launch.h"

namespace fsdpc::cuda {

namespace {

using bf16 = __nv_bfloat16;
using f16 = __half;

constexpr int kVec = 4;  // elements per vector step

template <class T>
struct alignas(kVec * sizeof(T)) Vec {
  T v[kVec];
};

// The type arithmetic runs in: f32 for the 16-bit floats, else the type.
template <class T>
using Math = std::conditional_t<std::is_same_v<T, bf16> || std::is_same_v<T, f16>, float, T>;

template <class T>
__host__ __device__ __forceinline__ Math<T> to_math(T v) {
  if constexpr (std::is_same_v<Math<T>, T>)
    return v;
  else
    return to_f32(v);
}

template <class T>
__host__ __device__ __forceinline__ T from_math(Math<T> v) {
  if constexpr (std::is_same_v<Math<T>, T>)
    return v;
  else
    return from_f32<T>(v);  // round to nearest even
}

template <class I>
struct IntRange;
template <>
struct IntRange<int32_t> {
  static constexpr int32_t lo = INT32_MIN, hi = INT32_MAX;
};
template <>
struct IntRange<int64_t> {
  static constexpr int64_t lo = INT64_MIN, hi = INT64_MAX;
};

// Floating to integer: truncation, saturating at the range and NaN to 0,
// as the GPU's cvt.rzi does (a plain cast out of range is undefined in C++,
// and this also runs on the host for scalar literals).
template <class I, class F>
__host__ __device__ I saturating_cast(F v) {
  if (!(v == v)) return 0;
  if (v <= static_cast<F>(IntRange<I>::lo)) return IntRange<I>::lo;
  if (v >= static_cast<F>(IntRange<I>::hi)) return IntRange<I>::hi;  // hi rounds up to 2^31 / 2^63
  return static_cast<I>(v);
}

// The IR's conversion (convert_element_type), bool held as uint8_t.
template <class To, class From>
__host__ __device__ To convert_value(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (std::is_same_v<To, uint8_t>) {  // to bool: nonzero
    return static_cast<uint8_t>(to_math(x) != static_cast<Math<From>>(0));
  } else if constexpr (std::is_same_v<From, uint8_t>) {  // from bool: 0 or 1
    return convert_value<To>(static_cast<int32_t>(x != 0));
  } else if constexpr (std::is_same_v<To, bf16>) {  // one rounding from the source value
    if constexpr (std::is_same_v<From, double>) return __double2bfloat16(x);
    else if constexpr (std::is_same_v<From, int64_t>) return __ll2bfloat16_rn(x);
    else if constexpr (std::is_same_v<From, int32_t>) return __int2bfloat16_rn(x);
    else return __float2bfloat16(to_math(x));  // f32, f16 (exact in f32)
  } else if constexpr (std::is_same_v<To, f16>) {
    if constexpr (std::is_same_v<From, double>) return __double2half(x);
    else if constexpr (std::is_same_v<From, int64_t>) return __ll2half_rn(x);
    else if constexpr (std::is_same_v<From, int32_t>) return __int2half_rn(x);
    else return __float2half(to_math(x));  // f32, bf16 (exact in f32)
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<Math<From>>) {
    return saturating_cast<To>(to_math(x));
  } else {
    return static_cast<To>(to_math(x));  // int <-> int (wrapping), to f32/f64
  }
}

// A scalar literal in the math type of a tensor of type T: float types keep
// the literal in f32 (f64 for f64), integers truncate, bool is nonzero.
template <class T>
Math<T> scalar_math(double s) {
  if constexpr (std::is_floating_point_v<Math<T>>)
    return static_cast<Math<T>>(s);
  else
    return convert_value<T>(s);
}

// An operand: a tensor, or (p null) a scalar literal `s`.
template <class T>
struct Input {
  const T* p;
  Math<T> s;
};

template <class T>
Input<T> input(const void* p, Math<T> s) {
  return Input<T>{static_cast<const T*>(p), s};
}

template <class T>
__device__ __forceinline__ Math<T> load(const Input<T>& in, int64_t i) {
  return in.p ? to_math(in.p[i]) : in.s;
}

template <class T>
__device__ __forceinline__ void load_vec(const Input<T>& in, int64_t v, Math<T> (&out)[kVec]) {
  if (in.p) {
    const Vec<T> a = reinterpret_cast<const Vec<T>*>(in.p)[v];
#pragma unroll
    for (int k = 0; k < kVec; ++k) out[k] = to_math(a.v[k]);
  } else {
#pragma unroll
    for (int k = 0; k < kVec; ++k) out[k] = in.s;
  }
}

// ---- the per-element math ----

__device__ __forceinline__ float unary_math(UnaryOp op, float v) {
  switch (op) {
    case UnaryOp::neg: return -v;
    case UnaryOp::exp: return expf(v);
    case UnaryOp::log: return logf(v);
    case UnaryOp::tanh: return tanhf(v);
    case UnaryOp::sqrt: return sqrtf(v);
    case UnaryOp::sin: return sinf(v);
    case UnaryOp::cos: return cosf(v);
    case UnaryOp::rsqrt: return 1.0f / sqrtf(v);  // as the CPU: rsqrtf is 2 ulp off
  }
  return v;
}

// Integers have neg only; unsigned arithmetic makes -INT_MIN wrap.
template <class I>
  requires std::is_integral_v<I>
__device__ __forceinline__ I unary_math(UnaryOp, I v) {
  using U = std::make_unsigned_t<I>;
  return static_cast<I>(U{0} - static_cast<U>(v));
}

// NaN on either side wins, as torch.maximum and the CPU.
template <class M>
__device__ __forceinline__ M nan_max(M a, M b) {
  return (a > b || a != a) ? a : b;
}

__device__ __forceinline__ float binary_math(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::add: return a + b;
    case BinaryOp::sub: return a - b;
    case BinaryOp::mul: return a * b;
    case BinaryOp::div: return a / b;
    case BinaryOp::maximum: return nan_max(a, b);
    case BinaryOp::pow:
      // Small integer powers (variances, gelu's cube) as the CPU computes them.
      if (b == 1.0f) return a;
      if (b == 2.0f) return a * a;
      if (b == 3.0f) return a * a * a;
      return powf(a, b);
  }
  return a;
}

// Integers: add, sub, mul (wrapping) and maximum; launch_binary rejects div
// and pow before a launch.
template <class I>
  requires std::is_integral_v<I>
__device__ __forceinline__ I binary_math(BinaryOp op, I a, I b) {
  using U = std::make_unsigned_t<I>;
  switch (op) {
    case BinaryOp::add: return static_cast<I>(static_cast<U>(a) + static_cast<U>(b));
    case BinaryOp::sub: return static_cast<I>(static_cast<U>(a) - static_cast<U>(b));
    case BinaryOp::mul: return static_cast<I>(static_cast<U>(a) * static_cast<U>(b));
    case BinaryOp::maximum: return a > b ? a : b;
    default: break;
  }
  return 0;
}

template <class M>
__device__ __forceinline__ uint8_t compare_math(CompareOp op, M a, M b) {
  switch (op) {
    case CompareOp::eq: return a == b;
    case CompareOp::ne: return a != b;
    case CompareOp::lt: return a < b;
    case CompareOp::le: return a <= b;
    case CompareOp::gt: return a > b;
    case CompareOp::ge: return a >= b;
  }
  return 0;
}

// ---- bodies: one element at i, or kVec elements at vector index v ----

template <class T>
struct UnaryBody {
  UnaryOp op;
  const T* x;
  T* y;
  __device__ void one(int64_t i) const { y[i] = from_math<T>(unary_math(op, to_math(x[i]))); }
  __device__ void vec(int64_t v) const {
    const Vec<T> a = reinterpret_cast<const Vec<T>*>(x)[v];
    Vec<T> r;
#pragma unroll
    for (int k = 0; k < kVec; ++k) r.v[k] = from_math<T>(unary_math(op, to_math(a.v[k])));
    reinterpret_cast<Vec<T>*>(y)[v] = r;
  }
};

template <class From, class To>
struct ConvertBody {
  const From* x;
  To* y;
  __device__ void one(int64_t i) const { y[i] = convert_value<To>(x[i]); }
  __device__ void vec(int64_t v) const {
    const Vec<From> a = reinterpret_cast<const Vec<From>*>(x)[v];
    Vec<To> r;
#pragma unroll
    for (int k = 0; k < kVec; ++k) r.v[k] = convert_value<To>(a.v[k]);
    reinterpret_cast<Vec<To>*>(y)[v] = r;
  }
};

template <class T>
struct BinaryBody {
  BinaryOp op;
  Input<T> a, b;
  T* y;
  __device__ void one(int64_t i) const { y[i] = from_math<T>(binary_math(op, load(a, i), load(b, i))); }
  __device__ void vec(int64_t v) const {
    Math<T> va[kVec], vb[kVec];
    load_vec(a, v, va);
    load_vec(b, v, vb);
    Vec<T> r;
#pragma unroll
    for (int k = 0; k < kVec; ++k) r.v[k] = from_math<T>(binary_math(op, va[k], vb[k]));
    reinterpret_cast<Vec<T>*>(y)[v] = r;
  }
};

template <class T>
struct CompareBody {
  CompareOp op;
  Input<T> a, b;
  uint8_t* y;
  __device__ void one(int64_t i) const { y[i] = compare_math(op, load(a, i), load(b, i)); }
  __device__ void vec(int64_t v) const {
    Math<T> va[kVec], vb[kVec];
    load_vec(a, v, va);
    load_vec(b, v, vb);
    Vec<uint8_t> r;
#pragma unroll
    for (int k = 0; k < kVec; ++k) r.v[k] = compare_math(op, va[k], vb[k]);
    reinterpret_cast<Vec<uint8_t>*>(y)[v] = r;
  }
};

// where moves bits: B is an unsigned integer of the element's size.
template <class B>
struct WhereBody {
  const uint8_t* cond;
  Input<B> a, b;
  B* y;
  __device__ void one(int64_t i) const { y[i] = cond[i] ? load(a, i) : load(b, i); }
  __device__ void vec(int64_t v) const {
    const Vec<uint8_t> c = reinterpret_cast<const Vec<uint8_t>*>(cond)[v];
    B va[kVec], vb[kVec];
    load_vec(a, v, va);
    load_vec(b, v, vb);
    Vec<B> r;
#pragma unroll
    for (int k = 0; k < kVec; ++k) r.v[k] = c.v[k] ? va[k] : vb[k];
    reinterpret_cast<Vec<B>*>(y)[v] = r;
  }
};

// Elements [0, n/kVec*kVec) in vector steps when `vec`, the rest one by one.
template <class Body>
__global__ void elementwise_kernel(Body body, int64_t n, bool vec) {
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t done = 0;
  if (vec) {
    const int64_t nv = n / kVec;
    for (int64_t v = first; v < nv; v += step) body.vec(v);
    done = nv * kVec;
  }
  for (int64_t i = done + first; i < n; i += step) body.one(i);
}

template <class Body>
void run(const Body& body, int64_t n, bool vec, cudaStream_t stream) {
  FSDPC_CHECK(n >= 0) << "negative element count " << n;
  if (n == 0) return;
  // The tail after the vector steps is < kVec elements: the first block covers it.
  const Launch l = launch_1d(vec ? (n + kVec - 1) / kVec : n);
  elementwise_kernel<<<l.grid, l.block, 0, stream>>>(body, n, vec);
  FSDPC_CUDA_CHECK_LAUNCH();
}

// True when a pointer (null: a scalar literal) suits vector steps of T.
template <class T>
bool vec_aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % sizeof(Vec<T>) == 0;
}

// Calls f(T{}) with T the storage type of t.
template <class F>
void with_type(ElementType t, F&& f) {
  switch (t) {
    case ElementType::f32: return f(float{});
    case ElementType::bf16: return f(bf16{});
    case ElementType::f16: return f(f16{});
    case ElementType::f64: return f(double{});
    case ElementType::i32: return f(int32_t{});
    case ElementType::i64: return f(int64_t{});
    case ElementType::boolean: return f(uint8_t{});
  }
  FSDPC_CHECK(false) << "unknown element type " << static_cast<int>(t);
}

// Calls f(T{}) for the types arithmetic kernels hold (f32, bf16, i32, i64).
template <class F>
void with_arith_type(const char* what, ElementType t, F&& f) {
  switch (t) {
    case ElementType::f32: return f(float{});
    case ElementType::bf16: return f(bf16{});
    case ElementType::i32: return f(int32_t{});
    case ElementType::i64: return f(int64_t{});
    default: break;
  }
  FSDPC_CHECK(false) << what << ": element type " << static_cast<int>(t) << " reached the kernel";
}

// The bits of scalar literal s converted to T, for where.
template <class T, class B>
B scalar_bits(double s) {
  static_assert(sizeof(T) == sizeof(B));
  const T v = convert_value<T>(s);
  B bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

template <class T, class B>
void run_where(const uint8_t* cond, const void* a, double as, const void* b, double bs, void* y, int64_t n,
               cudaStream_t stream) {
  const WhereBody<B> body{cond, input<B>(a, scalar_bits<T, B>(as)), input<B>(b, scalar_bits<T, B>(bs)),
                          static_cast<B*>(y)};
  const bool vec = vec_aligned<uint8_t>(cond) && vec_aligned<B>(a) && vec_aligned<B>(b) && vec_aligned<B>(y);
  run(body, n, vec, stream);
}

}  // namespace

void launch_unary(UnaryOp op, ElementType t, const void* x, void* y, int64_t n, cudaStream_t stream) {
  with_arith_type("launch_unary", t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) FSDPC_CHECK(op == UnaryOp::neg) << "integer unary op " << int(op);
    const UnaryBody<T> body{op, static_cast<const T*>(x), static_cast<T*>(y)};
    run(body, n, vec_aligned<T>(x) && vec_aligned<T>(y), stream);
  });
}

void launch_convert(ElementType from, const void* x, ElementType to, void* y, int64_t n, cudaStream_t stream) {
  with_type(from, [&](auto from_tag) {
    with_type(to, [&](auto to_tag) {
      using From = decltype(from_tag);
      using To = decltype(to_tag);
      const ConvertBody<From, To> body{static_cast<const From*>(x), static_cast<To*>(y)};
      run(body, n, vec_aligned<From>(x) && vec_aligned<To>(y), stream);
    });
  });
}

void launch_binary(BinaryOp op, ElementType t, const void* a, double a_scalar, const void* b, double b_scalar,
                   void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;  // an empty tensor may have a null pointer
  FSDPC_CHECK(a || b) << "launch_binary: both operands are scalars";
  with_arith_type("launch_binary", t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>)
      FSDPC_CHECK(op != BinaryOp::div && op != BinaryOp::pow) << "integer div/pow reached the kernel";
    const BinaryBody<T> body{op, input<T>(a, scalar_math<T>(a_scalar)), input<T>(b, scalar_math<T>(b_scalar)),
                             static_cast<T*>(y)};
    run(body, n, vec_aligned<T>(a) && vec_aligned<T>(b) && vec_aligned<T>(y), stream);
  });
}

void launch_compare(CompareOp op, ElementType t, const void* a, double a_scalar, const void* b, double b_scalar,
                    uint8_t* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;  // an empty tensor may have a null pointer
  FSDPC_CHECK(a || b) << "launch_compare: both operands are scalars";
  with_type(t, [&](auto tag) {
    using T = decltype(tag);
    const CompareBody<T> body{op, input<T>(a, scalar_math<T>(a_scalar)), input<T>(b, scalar_math<T>(b_scalar)), y};
    run(body, n, vec_aligned<T>(a) && vec_aligned<T>(b) && vec_aligned<uint8_t>(y), stream);
  });
}

void launch_where(ElementType t, const uint8_t* cond, const void* a, double a_scalar, const void* b,
                  double b_scalar, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;  // an empty tensor may have a null pointer
  FSDPC_CHECK(a || b) << "launch_where: both values are scalars";
  switch (t) {
    case ElementType::f32: return run_where<float, uint32_t>(cond, a, a_scalar, b, b_scalar, y, n, stream);
    case ElementType::bf16: return run_where<bf16, uint16_t>(cond, a, a_scalar, b, b_scalar, y, n, stream);
    case ElementType::f16: return run_where<f16, uint16_t>(cond, a, a_scalar, b, b_scalar, y, n, stream);
    case ElementType::f64: return run_where<double, uint64_t>(cond, a, a_scalar, b, b_scalar, y, n, stream);
    case ElementType::i32: return run_where<int32_t, uint32_t>(cond, a, a_scalar, b, b_scalar, y, n, stream);
    case ElementType::i64: return run_where<int64_t, uint64_t>(cond, a, a_scalar, b, b_scalar, y, n, stream);
    case ElementType::boolean: return run_where<uint8_t, uint8_t>(cond, a, a_scalar, b, b_scalar, y, n, stream);
  }
  FSDPC_CHECK(false) << "launch_where: unknown element type " << static_cast<int>(t);
}

}  // namespace fsdpc::cuda
