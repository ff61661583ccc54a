// Elementwise kernels of the CUDA executor: unary math, conversions, binary
// arithmetic, comparisons and where. Each reads the bound symbol (op, scalar
// literals, dtypes), rejects a dtype the device code does not hold with the
// op's name, and launches kernels/elementwise.cu on the compute stream.
// IR elementwise ops never broadcast (docs/ir.md): operands have the
// output's element count, or are scalar literals.
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
  switch (op) {
    case OpId::Neg: return UnaryOp::neg;
    case OpId::Exp: return UnaryOp::exp;
    case OpId::Log: return UnaryOp::log;
    case OpId::Tanh: return UnaryOp::tanh;
    case OpId::Sqrt: return UnaryOp::sqrt;
    case OpId::Rsqrt: return UnaryOp::rsqrt;
    case OpId::Sin: return UnaryOp::sin;
    case OpId::Cos: return UnaryOp::cos;
    // not unary: the check below
    case OpId::Sigmoid: case OpId::ConvertElementType: case OpId::Add: case OpId::Sub: case OpId::Mul:
    case OpId::Div: case OpId::Pow: case OpId::Maximum: case OpId::Eq: case OpId::Ne: case OpId::Lt:
    case OpId::Le: case OpId::Gt: case OpId::Ge: case OpId::Where:
    case OpId::Sum: case OpId::Amax: case OpId::Reshape: case OpId::Permute: case OpId::BroadcastInDim:
    case OpId::Slice: case OpId::Pad: case OpId::Cat: case OpId::Take: case OpId::IndexAdd:
    case OpId::Matmul: case OpId::Full: case OpId::Iota: case OpId::AxisIndex:
    case OpId::Linear: case OpId::Gelu: case OpId::Softmax: case OpId::LayerNorm:
    case OpId::ScaledDotProductAttention: case OpId::CrossEntropy: case OpId::Silu: case OpId::RmsNorm:
    case OpId::Synchronize: case OpId::AllGather: case OpId::ReduceScatter: case OpId::AllReduce:
    case OpId::Broadcast: case OpId::Wait: case OpId::Send: case OpId::Recv:
    case OpId::Pack: case OpId::Unpack: case OpId::Fusion:
    case OpId::Del:
      break;
  }
  FSDPC_CHECK(false) << op_name(op) << " is not a unary op";
  return UnaryOp::neg;
}

BinaryOp binary_op(OpId op) {
  switch (op) {
    case OpId::Add: return BinaryOp::add;
    case OpId::Sub: return BinaryOp::sub;
    case OpId::Mul: return BinaryOp::mul;
    case OpId::Div: return BinaryOp::div;
    case OpId::Pow: return BinaryOp::pow;
    case OpId::Maximum: return BinaryOp::maximum;
    // not binary arithmetic: the check below
    case OpId::Neg: case OpId::Exp: case OpId::Log: case OpId::Tanh: case OpId::Sqrt: case OpId::Rsqrt:
    case OpId::Sin: case OpId::Cos: case OpId::Sigmoid: case OpId::ConvertElementType: case OpId::Eq:
    case OpId::Ne: case OpId::Lt: case OpId::Le: case OpId::Gt: case OpId::Ge: case OpId::Where:
    case OpId::Sum: case OpId::Amax: case OpId::Reshape: case OpId::Permute: case OpId::BroadcastInDim:
    case OpId::Slice: case OpId::Pad: case OpId::Cat: case OpId::Take: case OpId::IndexAdd:
    case OpId::Matmul: case OpId::Full: case OpId::Iota: case OpId::AxisIndex:
    case OpId::Linear: case OpId::Gelu: case OpId::Softmax: case OpId::LayerNorm:
    case OpId::ScaledDotProductAttention: case OpId::CrossEntropy: case OpId::Silu: case OpId::RmsNorm:
    case OpId::Synchronize: case OpId::AllGather: case OpId::ReduceScatter: case OpId::AllReduce:
    case OpId::Broadcast: case OpId::Wait: case OpId::Send: case OpId::Recv:
    case OpId::Pack: case OpId::Unpack: case OpId::Fusion:
    case OpId::Del:
      break;
  }
  FSDPC_CHECK(false) << op_name(op) << " is not a binary op";
  return BinaryOp::add;
}

CompareOp compare_op(OpId op) {
  switch (op) {
    case OpId::Eq: return CompareOp::eq;
    case OpId::Ne: return CompareOp::ne;
    case OpId::Lt: return CompareOp::lt;
    case OpId::Le: return CompareOp::le;
    case OpId::Gt: return CompareOp::gt;
    case OpId::Ge: return CompareOp::ge;
    // not comparisons: the check below
    case OpId::Neg: case OpId::Exp: case OpId::Log: case OpId::Tanh: case OpId::Sqrt: case OpId::Rsqrt:
    case OpId::Sin: case OpId::Cos: case OpId::Sigmoid: case OpId::ConvertElementType: case OpId::Add:
    case OpId::Sub: case OpId::Mul: case OpId::Div: case OpId::Pow: case OpId::Maximum: case OpId::Where:
    case OpId::Sum: case OpId::Amax: case OpId::Reshape: case OpId::Permute: case OpId::BroadcastInDim:
    case OpId::Slice: case OpId::Pad: case OpId::Cat: case OpId::Take: case OpId::IndexAdd:
    case OpId::Matmul: case OpId::Full: case OpId::Iota: case OpId::AxisIndex:
    case OpId::Linear: case OpId::Gelu: case OpId::Softmax: case OpId::LayerNorm:
    case OpId::ScaledDotProductAttention: case OpId::CrossEntropy: case OpId::Silu: case OpId::RmsNorm:
    case OpId::Synchronize: case OpId::AllGather: case OpId::ReduceScatter: case OpId::AllReduce:
    case OpId::Broadcast: case OpId::Wait: case OpId::Send: case OpId::Recv:
    case OpId::Pack: case OpId::Unpack: case OpId::Fusion:
    case OpId::Del:
      break;
  }
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
