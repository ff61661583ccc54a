// The CUDA executor: which bound symbols it claims and the kernel of each op
// (the kernels live in cuda_<family>.cpp).
#include "executors/cuda/cuda_executor.h"

#include <initializer_list>

#include "executors/cuda/cuda_fusion.h"
#include "executors/cuda/cuda_kernels.h"
#include "executors/cuda/head_plan.h"
#include "ir/scalar_expr.h"

namespace fsdpc {

namespace cuda {

namespace {

bool is_one_of(DType d, std::initializer_list<DType> set) {
  for (DType s : set)
    if (s == d) return true;
  return false;
}

// The op's kernel: its row of executors/kernel_families.def; without one, an
// elementwise op's scalar expression, generated and compiled
// (cuda::expr_kernel), and for any other op nullptr: not run here (see
// supports()). A lookup of the rows rather than a switch, so that an
// elementwise op needs no row.
KernelFn kernel_of(OpId op) {
#define FSDPC_KERNEL(id, kernel) \
  if (op == OpId::id) return kernel;
#include "executors/kernel_families.def"
#undef FSDPC_KERNEL
  return op_info(op).category == OpCategory::elementwise ? expr_kernel : nullptr;
}

// The dtypes of the hand-written elementwise kernels (kernels/elementwise.cu).
bool hand_written_supports(OpId op, DType d) {
  for (OpId id : {OpId::Neg, OpId::Add, OpId::Sub, OpId::Mul, OpId::Maximum})
    if (op == id) return is_one_of(d, {DType::f32, DType::bf16, DType::i32, DType::i64});
  for (OpId id : {OpId::Eq, OpId::Ne, OpId::Lt, OpId::Le, OpId::Gt, OpId::Ge})
    if (op == id) return d == DType::boolean;  // operands: checked by the kernel
  if (op == OpId::ConvertElementType || op == OpId::Where)
    return is_one_of(d, {DType::f32, DType::bf16, DType::f16, DType::f64, DType::i32, DType::i64, DType::boolean});
  return is_one_of(d, {DType::f32, DType::bf16});  // the math functions, div and pow
}

}  // namespace

bool supports(OpId op, DType d) {
  const std::initializer_list<DType> kFloat = {DType::f32, DType::bf16};
  switch (op) {
    FSDPC_ELEMENTWISE_CASES
      return kernel_of(op) == expr_kernel ? runs_generated(op, d) : hand_written_supports(op, d);
    FSDPC_REDUCTION_CASES
    FSDPC_MATMUL_CASES
    FSDPC_COMPOSITE_CASES
      return is_one_of(d, kFloat);
    case OpId::IndexAdd:
      return is_one_of(d, {DType::f32, DType::bf16, DType::i32, DType::i64});
    case OpId::Iota:  // every numeric dtype kernels/copy.cu's iota writes (the CPU's f64 too)
      return is_one_of(d, {DType::f32, DType::bf16, DType::f16, DType::f64, DType::i32, DType::i64});
    FSDPC_SHAPE_CASES
    FSDPC_BUFFER_CASES  // i8: quantized buffers, moved by the copy kernels as bytes
      return is_one_of(d, {DType::f32, DType::bf16, DType::f16, DType::f64, DType::i32, DType::i64,
                           DType::boolean, DType::i8});
    case OpId::Take: case OpId::Full:
      return is_one_of(d, {DType::f32, DType::bf16, DType::f16, DType::f64, DType::i32, DType::i64,
                           DType::boolean});
    // Not run here: synchronize, the collectives, wait, axis_index, del (NCCL and the runtime);
    // a fusion region is formed after claiming. (runs_generated() is false for
    // them too: only elementwise ops have a scalar expression.)
    FSDPC_COLLECTIVE_CASES
    FSDPC_FUSION_CASES
    FSDPC_MEMORY_CASES
    case OpId::AxisIndex:
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

  // The fused head's block (cuda/head_plan.h), planned as its kernels plan
  // it. The other kernels' scratch (attention's scores, reductions'
  // partials, cross_entropy's row losses) comes from CudaContext::scratch,
  // accounted by the allocator but not yet predicted.
  int64_t scratch_bytes(const BoundSymbol& b, const std::vector<const TensorType*>& in) const override {
    return cuda::is_head_op(b.op) ? cuda::plan_head(b, *in.at(0), *in.at(1)).bytes : 0;
  }
};

}  // namespace

const Executor& cuda_executor() {
  static const CudaExecutor executor;
  return executor;
}

}  // namespace fsdpc
