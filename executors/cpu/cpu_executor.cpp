// The CPU executor: which bound symbols it claims and the kernel of each op
// (the kernels live in cpu_<family>.cpp). claims() sees a symbol's outputs
// but not its inputs' types, so kernels check what only the inputs tell.
#include "executors/cpu/cpu_executor.h"

#include <array>

#include "executors/cpu/cpu_kernels.h"
#include "executors/cpu/cpu_region.h"
#include "ir/scalar_expr.h"

namespace fsdpc {

namespace {

using namespace cpu;

bool is_one_of(DType d, std::initializer_list<DType> set) {
  for (DType s : set)
    if (s == d) return true;
  return false;
}

// Whether the op runs here for outputs of dtype d.
bool supports(OpId op, DType d) {
  switch (op) {
    case OpId::Exp: case OpId::Log: case OpId::Tanh: case OpId::Sqrt: case OpId::Rsqrt:
    case OpId::Sin: case OpId::Cos:
    case OpId::Div: case OpId::Pow: case OpId::Sum: case OpId::Amax: case OpId::Matmul:
    case OpId::Linear: case OpId::Gelu: case OpId::Softmax: case OpId::LayerNorm:
    case OpId::ScaledDotProductAttention: case OpId::CrossEntropy: case OpId::Silu: case OpId::RmsNorm:
      return d == DType::f32;
    case OpId::Neg: case OpId::Add: case OpId::Sub: case OpId::Mul: case OpId::Maximum:
    case OpId::IndexAdd:
      return is_one_of(d, {DType::f32, DType::i32, DType::i64});
    case OpId::Iota:
      return is_one_of(d, {DType::f32, DType::f64, DType::i32, DType::i64});
    case OpId::Eq: case OpId::Ne: case OpId::Lt: case OpId::Le: case OpId::Gt: case OpId::Ge:
      return d == DType::boolean;  // operands: any CPU dtype, checked by the kernel
    case OpId::ConvertElementType: case OpId::Where: case OpId::Reshape: case OpId::Permute:
    case OpId::BroadcastInDim: case OpId::Slice: case OpId::Pad: case OpId::Cat: case OpId::Take:
    case OpId::Full: case OpId::Pack: case OpId::Unpack:
      return is_cpu_dtype(d);
    case OpId::Sigmoid:  // an elementwise op without a kernel of its own: its scalar expression
      return runs_generated(op, d);
    // Not run here: synchronize, the collectives, wait, axis_index, del (the runtime and MPI);
    // a fusion region is formed after claiming. (runs_generated() is false for
    // them too: only elementwise ops have a scalar expression.)
    case OpId::AxisIndex: case OpId::Synchronize: case OpId::AllGather: case OpId::ReduceScatter:
    case OpId::AllReduce: case OpId::Broadcast: case OpId::Wait: case OpId::Send: case OpId::Recv:
    case OpId::Fusion: case OpId::Del:
      return false;
  }
  op_outside_table(op);
}

KernelFn kernel_of(OpId op) {
  switch (op) {
#define FSDPC_KERNEL(op, kernel) \
  case OpId::op:                 \
    return kernel;
#include "executors/kernel_families.def"
#undef FSDPC_KERNEL
    case OpId::Sigmoid:  // no row: its scalar expression, interpreted (cpu_scalar_expr.cpp)
      return expr_kernel;
    // No compute kernel: not run here (see supports()).
    case OpId::AxisIndex: case OpId::Synchronize: case OpId::AllGather: case OpId::ReduceScatter:
    case OpId::AllReduce: case OpId::Broadcast: case OpId::Wait: case OpId::Send: case OpId::Recv:
    case OpId::Fusion: case OpId::Del:
      return nullptr;
  }
  op_outside_table(op);
}

class CpuExecutor final : public Executor {
 public:
  std::string_view name() const override { return "cpu"; }

  bool claims(const BoundSymbol& b) const override {
    if (!kernel_of(b.op)) return false;
    for (const Proxy& p : b.outputs)
      if (p.type.device.kind != DeviceKind::cpu || p.type.future || !supports(b.op, p.type.dtype))
        return false;
    return true;
  }

  // nullptr for an op it never claims. Fusion regions are formed after
  // claiming (passes/fuse.h, passes/fold_transpose.h); cpu_region.h runs them.
  KernelFn kernel(OpId op) const override { return op == OpId::Fusion ? cpu::region_kernel : kernel_of(op); }
};

}  // namespace

const Executor& cpu_executor() {
  static const CpuExecutor executor;
  return executor;
}

namespace cpu {

bool is_cpu_dtype(DType d) {
  return is_one_of(d, {DType::f32, DType::f64, DType::i32, DType::i64, DType::boolean});
}

void require_f32(const BoundSymbol& b, const TensorView& v, const char* what) {
  if (v.type->dtype != DType::f32)
    fail("cpu_", op_name(b.op), ": ", what, " is ", dtype_name(v.type->dtype), shape_str(v.type->shape),
         "; the CPU executor computes this op in f32 only");
}

float* scratch_floats(int64_t n, int slot) {
  constexpr int64_t kAlign = 16;  // floats: 64 bytes, a cache line and a zmm register
  thread_local std::array<std::vector<float>, 3> buffers;
  std::vector<float>& buf = buffers.at(slot);
  if (static_cast<int64_t>(buf.size()) < n + kAlign) buf.resize(n + kAlign);
  const auto at = reinterpret_cast<uintptr_t>(buf.data());
  return buf.data() + (kAlign - (at / sizeof(float)) % kAlign) % kAlign;
}

}  // namespace cpu

}  // namespace fsdpc
