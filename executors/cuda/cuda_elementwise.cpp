// Elementwise kernels of the CUDA executor: unary math, conversions, binary
// arithmetic, comparisons and where. Each reads the bound symbol (op, scalar
// literals, dtypes), rejects a dtype the device code does not hold with the
// op's name, and launches kernels/elementwise.cu on the compute stream.
// IR elementwise ops never broadcast (docs/ir.md): operands have the
// output's element count, or are scalar literals.
// Each serves the ops its executors/kernel_families.def rows name, and maps
// them by name rather than switching over every OpId: an elementwise op without
// a row runs its generated scalar expression (cuda::expr_kernel) instead.
#include <string>

#include "executors/cuda/cuda_context.h"
#include "executors/cuda/cuda_kernels.h"
#include "executors/cuda/kernels/elementwise.h"
#include "ir/error.h"

namespace fsdpc::cuda {

namespace {

ElementType element_type(DType d) {
  switch (d) {
    case DType::f32: return ElementType::f32;
    case DType::bf16: return ElementType::bf16;
    case DType::f16: return ElementType::f16;
    case DType::f64: return ElementType::f64;
    case DType::i32: return ElementType::i32;
    case DType::i64: return ElementType::i64;
    case DType::boolean: return ElementType::boolean;
    case DType::i8:  // quantized buffers: only dequantize reads them
      fail("cuda: the elementwise kernels do not take i8 (a quantized buffer; dequantize reads it)");
  }
  FSDPC_CHECK(false) << "unknown dtype " << static_cast<int>(d);
  return ElementType::f32;
}

std::string kernel_name(const BoundSymbol& b) { return "cuda_" + std::string(op_name(b.op)); }

bool is_float_storage(DType d) { return d == DType::f32 || d == DType::bf16; }
bool is_int(DType d) { return d == DType::i32 || d == DType::i64; }

// Ops that also take i32 and i64 (cuda::supports in cuda_executor.cpp).
bool takes_ints(OpId op) {
  return op == OpId::Neg || op == OpId::Add || op == OpId::Sub || op == OpId::Mul || op == OpId::Maximum;
}

// Fails unless the device code computes `b` in dtype d.
void require_arith_dtype(const BoundSymbol& b, DType d) {
  if (is_float_storage(d) || (is_int(d) && takes_ints(b.op))) return;
  fail(kernel_name(b), ": dtype ", dtype_name(d), " is not supported (f32, bf16",
       takes_ints(b.op) ? ", i32, i64)" : ")");
}

// Every tensor input among inputs [first, end) must have dtype d (the meta
// functions ensure it; a hand-built trace may not).
void require_inputs_dtype(const BoundSymbol& b, const Views& in, size_t first, DType d) {
  for (size_t i = first; i < in.size(); ++i) {
    if (b.inputs[i].is_scalar()) continue;
    if (in[i].type->dtype != d)
      fail(kernel_name(b), ": input ", i, " has dtype ", dtype_name(in[i].type->dtype), ", expected ",
           dtype_name(d));
  }
}

// An operand as the launch functions take it: the tensor's data, or null
// and the scalar literal. Told by the operand, not the pointer: an empty
// tensor may have a null pointer too.
struct Arg {
  const void* data = nullptr;
  double scalar = 0.0;
};

Arg arg(const BoundSymbol& b, const Views& in, size_t i) {
  if (b.inputs[i].is_scalar()) return {nullptr, *b.inputs[i].scalar};
  return {in[i].data, 0.0};
}

// The tensor among the inputs (at least one is, by the meta functions).
const TensorView& tensor_input(const BoundSymbol& b, const Views& in, size_t first) {
  for (size_t i = first; i < in.size(); ++i)
    if (!b.inputs[i].is_scalar()) return in[i];
  fail(kernel_name(b), ": every operand is a scalar literal");
}

int64_t count_of(const TensorView& v) { return numel(v.type->shape); }

UnaryOp unary_op(OpId op) {
  if (op == OpId::Neg) return UnaryOp::neg;
  if (op == OpId::Exp) return UnaryOp::exp;
  if (op == OpId::Log) return UnaryOp::log;
  if (op == OpId::Tanh) return UnaryOp::tanh;
  if (op == OpId::Sqrt) return UnaryOp::sqrt;
  if (op == OpId::Rsqrt) return UnaryOp::rsqrt;
  if (op == OpId::Sin) return UnaryOp::sin;
  if (op == OpId::Cos) return UnaryOp::cos;
  FSDPC_CHECK(false) << op_name(op) << " is not a unary op";
  return UnaryOp::neg;
}

BinaryOp binary_op(OpId op) {
  if (op == OpId::Add) return BinaryOp::add;
  if (op == OpId::Sub) return BinaryOp::sub;
  if (op == OpId::Mul) return BinaryOp::mul;
  if (op == OpId::Div) return BinaryOp::div;
  if (op == OpId::Pow) return BinaryOp::pow;
  if (op == OpId::Maximum) return BinaryOp::maximum;
  FSDPC_CHECK(false) << op_name(op) << " is not a binary op";
  return BinaryOp::add;
}

CompareOp compare_op(OpId op) {
  if (op == OpId::Eq) return CompareOp::eq;
  if (op == OpId::Ne) return CompareOp::ne;
  if (op == OpId::Lt) return CompareOp::lt;
  if (op == OpId::Le) return CompareOp::le;
  if (op == OpId::Gt) return CompareOp::gt;
  if (op == OpId::Ge) return CompareOp::ge;
  FSDPC_CHECK(false) << op_name(op) << " is not a comparison";
  return CompareOp::eq;
}

}  // namespace

FSDPC_CUDA_KERNEL(unary_kernel) {
  const DType d = out[0].type->dtype;
  require_arith_dtype(b, d);
  require_inputs_dtype(b, in, 0, d);
  const int64_t n = count_of(out[0]);
  if (n == 0) return;
  launch_unary(unary_op(b.op), element_type(d), in[0].data, out[0].data, n, cuda_context(ctx).compute());
}

FSDPC_CUDA_KERNEL(convert_kernel) {
  const int64_t n = count_of(out[0]);
  if (n == 0) return;
  launch_convert(element_type(in[0].type->dtype), in[0].data, element_type(out[0].type->dtype), out[0].data, n,
                 cuda_context(ctx).compute());
}

FSDPC_CUDA_KERNEL(binary_kernel) {
  const DType d = out[0].type->dtype;
  require_arith_dtype(b, d);
  require_inputs_dtype(b, in, 0, d);
  const int64_t n = count_of(out[0]);
  if (n == 0) return;
  const Arg x = arg(b, in, 0), y = arg(b, in, 1);
  launch_binary(binary_op(b.op), element_type(d), x.data, x.scalar, y.data, y.scalar, out[0].data, n,
                cuda_context(ctx).compute());
}

FSDPC_CUDA_KERNEL(compare_kernel) {
  if (out[0].type->dtype != DType::boolean)
    fail(kernel_name(b), ": output dtype ", dtype_name(out[0].type->dtype), ", expected bool");
  const DType d = tensor_input(b, in, 0).type->dtype;
  require_inputs_dtype(b, in, 0, d);
  const int64_t n = count_of(out[0]);
  if (n == 0) return;
  const Arg x = arg(b, in, 0), y = arg(b, in, 1);
  launch_compare(compare_op(b.op), element_type(d), x.data, x.scalar, y.data, y.scalar,
                 static_cast<uint8_t*>(out[0].data), n, cuda_context(ctx).compute());
}

FSDPC_CUDA_KERNEL(where_kernel) {
  if (b.inputs[0].is_scalar() || in[0].type->dtype != DType::boolean)
    fail(kernel_name(b), ": cond must be a bool tensor");
  const DType d = out[0].type->dtype;
  require_inputs_dtype(b, in, 1, d);
  const int64_t n = count_of(out[0]);
  if (n == 0) return;
  const Arg x = arg(b, in, 1), y = arg(b, in, 2);
  launch_where(element_type(d), static_cast<const uint8_t*>(in[0].data), x.data, x.scalar, y.data, y.scalar,
               out[0].data, n, cuda_context(ctx).compute());
}

}  // namespace fsdpc::cuda
