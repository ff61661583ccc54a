// Elementwise kernels: unary math, conversions, binary arithmetic,
// comparisons and where (conversions, comparisons and where also hold bf16;
// the math runs on f32 copies of bf16 operands, cpu_bf16.cpp). Plain loops the compiler vectorises, except exp and
// tanh: libm has no vector forms without -ffast-math, and oneDNN's eltwise
// JIT runs them 5-10x faster than a scalar loop. log stays on libm: oneDNN's
// loses ~50 ulp near 1, where log's result is small. Large tensors split
// over the rank's threads, element by element.
// Each kernel serves the ops its executors/kernel_families.def rows name, so it
// tests for those ops by name instead of switching over every OpId: an
// elementwise op without a row runs its scalar expression (cpu_scalar_expr.cpp)
// and never reaches here.
#include <cmath>

#include "executors/cpu/cpu_dnnl.h"
#include "executors/cpu/cpu_kernels.h"

namespace fsdpc::cpu {

namespace {

// Below this many elements a loop beats oneDNN's per-call overhead.
constexpr int64_t kEltwiseMin = 64;

// NaN on either side wins, as torch.maximum (the reference's nan_max).
// (Bitwise | keeps the select branch-free, so it vectorises.)
template <class T>
T nan_max(T a, T b) {
  return ((a > b) | (a != a)) ? a : b;
}

template <class T, class F>
void map(const T* x, T* y, int64_t n, F f) {
  FSDPC_CPU_PARALLEL_FOR(n)
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

void unary_f32(const BoundSymbol& b, const float* x, float* y, int64_t n) {
  auto dnnl_or = [&](dnnl::algorithm alg, float (*f)(float)) {
    if (n >= kEltwiseMin)
      eltwise(alg, 0.0f, 0.0f, x, y, n);
    else
      map(x, y, n, f);
  };
  if (b.op == OpId::Neg) return map(x, y, n, [](float v) { return -v; });
  if (b.op == OpId::Sqrt) return map(x, y, n, [](float v) { return std::sqrt(v); });
  if (b.op == OpId::Rsqrt) return map(x, y, n, [](float v) { return 1.0f / std::sqrt(v); });
  if (b.op == OpId::Exp) return dnnl_or(dnnl::algorithm::eltwise_exp, [](float v) { return std::exp(v); });
  if (b.op == OpId::Log) return map(x, y, n, [](float v) { return std::log(v); });
  if (b.op == OpId::Sin) return map(x, y, n, [](float v) { return std::sin(v); });
  if (b.op == OpId::Cos) return map(x, y, n, [](float v) { return std::cos(v); });
  if (b.op == OpId::Tanh) return dnnl_or(dnnl::algorithm::eltwise_tanh, [](float v) { return std::tanh(v); });
  FSDPC_CHECK(false) << op_name(b.op) << " is not a unary op";
}

// a op b over n elements, either side possibly a scalar literal, which takes
// the tensor's dtype T. Scalars are told by the operand, not by a null data
// pointer: an empty tensor may have one too.
template <class T, class R, class F>
void zip(const BoundSymbol& b, const Views& in, R* o, int64_t n, F f) {
  if (b.inputs[0].is_scalar()) {
    const T a = convert_value<T>(*b.inputs[0].scalar);
    const T* y = cdata<T>(in[1]);
    FSDPC_CPU_PARALLEL_FOR(n)
    for (int64_t i = 0; i < n; ++i) o[i] = f(a, y[i]);
  } else if (b.inputs[1].is_scalar()) {
    const T* x = cdata<T>(in[0]);
    const T c = convert_value<T>(*b.inputs[1].scalar);
    FSDPC_CPU_PARALLEL_FOR(n)
    for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], c);
  } else {
    const T* x = cdata<T>(in[0]);
    const T* y = cdata<T>(in[1]);
    FSDPC_CPU_PARALLEL_FOR(n)
    for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
  }
}

// x ** c for a scalar exponent: small integer powers (variances, gelu's
// cube) as products, which vectorise, where libm's pow is a scalar call.
void pow_scalar(const float* x, float c, float* y, int64_t n) {
  if (c == 2.0f) return map(x, y, n, [](float v) { return v * v; });
  if (c == 3.0f) return map(x, y, n, [](float v) { return v * v * v; });
  if (c == 1.0f) return map(x, y, n, [](float v) { return v; });
  map(x, y, n, [c](float v) { return std::pow(v, c); });
}

template <class T>
void arithmetic(const BoundSymbol& b, const Views& in, T* o, int64_t n) {
  if (b.op == OpId::Add) return zip<T>(b, in, o, n, [](T x, T y) { return T(x + y); });
  if (b.op == OpId::Sub) return zip<T>(b, in, o, n, [](T x, T y) { return T(x - y); });
  if (b.op == OpId::Mul) return zip<T>(b, in, o, n, [](T x, T y) { return T(x * y); });
  if (b.op == OpId::Maximum) return zip<T>(b, in, o, n, [](T x, T y) { return nan_max(x, y); });
  // div and pow: floating point only
  if constexpr (std::is_floating_point_v<T>) {
    if (b.op == OpId::Div) return zip<T>(b, in, o, n, [](T x, T y) { return x / y; });
    if (b.op == OpId::Pow) {
      if (b.inputs[1].is_scalar())
        return pow_scalar(cdata<T>(in[0]), static_cast<T>(*b.inputs[1].scalar), o, n);
      return zip<T>(b, in, o, n, [](T x, T y) { return std::pow(x, y); });
    }
  }
  fail("cpu_", op_name(b.op), ": dtype ", dtype_name(b.output().type.dtype),
       " is not supported (f32; add, sub, mul and maximum also take i32 and i64)");
}

template <class T>
void compare(const BoundSymbol& b, const Views& in, uint8_t* o, int64_t n) {
  auto as_bool = [](bool v) { return static_cast<uint8_t>(v); };
  if (b.op == OpId::Eq) return zip<T>(b, in, o, n, [&](T x, T y) { return as_bool(x == y); });
  if (b.op == OpId::Ne) return zip<T>(b, in, o, n, [&](T x, T y) { return as_bool(x != y); });
  if (b.op == OpId::Lt) return zip<T>(b, in, o, n, [&](T x, T y) { return as_bool(x < y); });
  if (b.op == OpId::Le) return zip<T>(b, in, o, n, [&](T x, T y) { return as_bool(x <= y); });
  if (b.op == OpId::Gt) return zip<T>(b, in, o, n, [&](T x, T y) { return as_bool(x > y); });
  if (b.op == OpId::Ge) return zip<T>(b, in, o, n, [&](T x, T y) { return as_bool(x >= y); });
  FSDPC_CHECK(false) << op_name(b.op) << " is not a comparison";
}

// The tensor among the inputs of an elementwise op (at least one is).
const TensorView& tensor_input(const BoundSymbol& b, const Views& in) {
  for (size_t i = 0; i < in.size(); ++i)
    if (!b.inputs[i].is_scalar()) return in[i];
  FSDPC_CHECK(false) << op_name(b.op) << " without a tensor input";
  return in[0];
}

}  // namespace

FSDPC_CPU_KERNEL(unary_kernel) {
  const int64_t n = count_of(out[0]);
  const DType d = out[0].type->dtype;
  if (d == DType::f32) return unary_f32(b, cdata<float>(in[0]), mdata<float>(out[0]), n);
  if (b.op == OpId::Neg && d == DType::i64)
    return map(cdata<int64_t>(in[0]), mdata<int64_t>(out[0]), n, [](int64_t v) { return -v; });
  if (b.op == OpId::Neg && d == DType::i32)
    return map(cdata<int32_t>(in[0]), mdata<int32_t>(out[0]), n, [](int32_t v) { return -v; });
  fail("cpu_", op_name(b.op), ": dtype ", dtype_name(d), " is not supported (f32; neg also i32, i64)");
}

FSDPC_CPU_KERNEL(convert_kernel) {
  const int64_t n = count_of(out[0]);
  const DType from = in[0].type->dtype, to = out[0].type->dtype;
  if (from == DType::f32 && to == DType::bf16) return narrow_to_bf16(cdata<float>(in[0]), mdata<uint16_t>(out[0]), n);
  if (from == DType::bf16 && to == DType::f32) return widen_bf16(cdata<uint16_t>(in[0]), mdata<float>(out[0]), n);
  visit_dtype(b, "the input", in[0].type->dtype, [&](auto from) {
    using From = decltype(from);
    visit_dtype(b, "the output", out[0].type->dtype, [&](auto to) {
      using To = decltype(to);
      const From* x = cdata<From>(in[0]);
      To* y = mdata<To>(out[0]);
      FSDPC_CPU_PARALLEL_FOR(n)
      for (int64_t i = 0; i < n; ++i) y[i] = convert_value<To>(x[i]);
    });
  });
}

FSDPC_CPU_KERNEL(binary_kernel) {
  const int64_t n = count_of(out[0]);
  switch (out[0].type->dtype) {
    case DType::f32: return arithmetic(b, in, mdata<float>(out[0]), n);
    case DType::i32: return arithmetic(b, in, mdata<int32_t>(out[0]), n);
    case DType::i64: return arithmetic(b, in, mdata<int64_t>(out[0]), n);
    default: break;
  }
  fail("cpu_", op_name(b.op), ": dtype ", dtype_name(out[0].type->dtype), " is not supported (f32, i32, i64)");
}

FSDPC_CPU_KERNEL(compare_kernel) {
  const int64_t n = count_of(out[0]);
  visit_dtype(b, "the operands", tensor_input(b, in).type->dtype, [&](auto t) {
    compare<decltype(t)>(b, in, mdata<uint8_t>(out[0]), n);
  });
}

FSDPC_CPU_KERNEL(where_kernel) {
  const int64_t n = count_of(out[0]);
  const uint8_t* cond = cdata<uint8_t>(in[0]);
  visit_dtype(b, "the output", out[0].type->dtype, [&](auto t) {
    using T = decltype(t);
    T* o = mdata<T>(out[0]);
    // One loop per placement of the scalar literal, so each vectorises.
    const Operand &ea = b.inputs[1], &eb = b.inputs[2];
    const T* x = cdata<T>(in[1]);
    const T* y = cdata<T>(in[2]);
    if (!ea.is_scalar() && !eb.is_scalar()) {
      FSDPC_CPU_PARALLEL_FOR(n)
      for (int64_t i = 0; i < n; ++i) o[i] = cond[i] ? x[i] : y[i];
    } else if (!ea.is_scalar()) {
      const T ys = convert_value<T>(*eb.scalar);
      FSDPC_CPU_PARALLEL_FOR(n)
      for (int64_t i = 0; i < n; ++i) o[i] = cond[i] ? x[i] : ys;
    } else {
      const T xs = convert_value<T>(*ea.scalar);
      FSDPC_CPU_PARALLEL_FOR(n)
      for (int64_t i = 0; i < n; ++i) o[i] = cond[i] ? xs : y[i];
    }
  });
}

}  // namespace fsdpc::cpu
