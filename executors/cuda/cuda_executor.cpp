// The CUDA executor: which bound symbols it claims and the kernel of each op
// (the kernels live in cuda_<family>.cpp).
#include "executors/cuda/cuda_executor.h"

#include <initializer_list>

#include "executors/cuda/cuda_fusion.h"
#include "executors/cuda/cuda_kernels.h"
#include "ir/scalar_expr.h"

namespace fsdpc {

namespace cuda {

namespace {

bool is_one_of(DType d, std::initializer_list<DType> set) {
  for (DType s : set)
    if (s == d) return true;
  return false;
}

KernelFn kernel_of(OpId op) {
  switch (op) {
#define FSDPC_KERNEL(op, kernel) \
  case OpId::op:                 \
    return kernel;
#include "executors/kernel_families.def"
#undef FSDPC_KERNEL
    case OpId::Sigmoid:  // no row: its scalar expression, compiled (cuda::expr_kernel)
      return expr_kernel;
    // No compute kernel: not run here (see supports()).
    case OpId::AxisIndex: case OpId::Synchronize: case OpId::AllGather: case OpId::ReduceScatter:
    case OpId::AllReduce: case OpId::Broadcast: case OpId::Wait: case OpId::Send: case OpId::Recv:
    case OpId::Fusion: case OpId::Del:
      return nullptr;
  }
  op_outside_table(op);
}

}  // namespace

bool supports(OpId op, DType d) {
  const std::initializer_list<DType> kFloat = {DType::f32, DType::bf16};
  switch (op) {
    case OpId::Exp: case OpId::Log: case OpId::Tanh: case OpId::Sqrt: case OpId::Rsqrt:
    case OpId::Sin: case OpId::Cos:
    case OpId::Div: case OpId::Pow: case OpId::Sum: case OpId::Amax: case OpId::Matmul:
    case OpId::Linear: case OpId::Gelu: case OpId::Softmax: case OpId::LayerNorm:
    case OpId::ScaledDotProductAttention: case OpId::CrossEntropy: case OpId::Silu: case OpId::RmsNorm:
      return is_one_of(d, kFloat);
    case OpId::Neg: case OpId::Add: case OpId::Sub: case OpId::Mul: case OpId::Maximum:
    case OpId::IndexAdd:
      return is_one_of(d, {DType::f32, DType::bf16, DType::i32, DType::i64});
    case OpId::Iota:  // every numeric dtype kernels/copy.cu's iota writes (the CPU's f64 too)
      return is_one_of(d, {DType::f32, DType::bf16, DType::f16, DType::f64, DType::i32, DType::i64});
    case OpId::Eq: case OpId::Ne: case OpId::Lt: case OpId::Le: case OpId::Gt: case OpId::Ge:
      return d == DType::boolean;  // operands: checked by the kernel
    case OpId::ConvertElementType: case OpId::Where: case OpId::Reshape: case OpId::Permute:
    case OpId::BroadcastInDim: case OpId::Slice: case OpId::Pad: case OpId::Cat: case OpId::Take:
    case OpId::Full: case OpId::Pack: case OpId::Unpack:
      return is_one_of(d, {DType::f32, DType::bf16, DType::f16, DType::f64, DType::i32, DType::i64,
                           DType::boolean});
    case OpId::Sigmoid:  // an elementwise op without a kernel of its own: its scalar expression
      return runs_generated(op, d);
    // Not run here: synchronize, the collectives, wait, axis_index, del (NCCL and the runtime);
    // a fusion region is formed after claiming. (runs_generated() is false for
    // them too: only elementwise ops have a scalar expression.)
    case OpId::AxisIndex: case OpId::Synchronize: case OpId::AllGather: case OpId::ReduceScatter:
    case OpId::AllReduce: case OpId::Broadcast: case OpId::Wait: case OpId::Send: case OpId::Recv:
    case OpId::Fusion: case OpId::Del:
      return false;
  }
  op_outside_table(op);
}

}  // namespace cuda

namespace {

class CudaExecutor final : public Executor {
 public:
  std::string_view name() const override { return "cuda"; }

  bool claims(const BoundSymbol& b) const override {
    if (!cuda::kernel_of(b.op)) return false;
    for (const Proxy& p : b.outputs)
      if (p.type.device.kind != DeviceKind::cuda || p.type.future || !cuda::supports(b.op, p.type.dtype))
        return false;
    return true;
  }

  // Fusion regions are formed after claiming (passes/fuse.h) and run as
  // NVRTC-compiled kernels (cuda_fusion.h).
  KernelFn kernel(OpId op) const override { return op == OpId::Fusion ? cuda::fusion_kernel : cuda::kernel_of(op); }
};

}  // namespace

const Executor& cuda_executor() {
  static const CudaExecutor executor;
  return executor;
}

}  // namespace fsdpc
