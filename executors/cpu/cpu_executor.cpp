// The CPU executor: which bound symbols it claims and the kernel of each op
// (the kernels live in cpu_<family>.cpp). claims() sees a symbol's outputs
// but not its inputs' types, so kernels check what only the inputs tell.
#include "executors/cpu/cpu_executor.h"

#include <array>

#include "executors/cpu/cpu_head.h"
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

// Whether the op's kernel holds bf16 itself: the oneDNN products (bf16 in,
// f32 accumulation), conversions and selections, and the ops that only move
// elements. Every other kernel computes in f32, and runs on f32 copies of
// its bf16 operands (in_f32, cpu_bf16.cpp).
bool holds_bf16(OpId op) {
  const OpCategory c = op_info(op).category;
  if (c == OpCategory::shape || c == OpCategory::buffer || c == OpCategory::matmul) return true;
  for (OpId id : {OpId::Linear, OpId::ScaledDotProductAttention, OpId::LinearCrossEntropy,
                  OpId::LinearCrossEntropyGrad, OpId::LinearCrossEntropyWithGrad, OpId::LinearCrossEntropyStats,
                  OpId::LinearCrossEntropyStatsGrad,
                  OpId::ScaledDotProductAttentionGrad, OpId::ConvertElementType, OpId::Where, OpId::Eq,
                  OpId::Ne, OpId::Lt, OpId::Le, OpId::Gt, OpId::Ge, OpId::Take, OpId::Full, OpId::Iota})
    if (op == id) return true;
  return false;
}

// The op's kernel: its row of executors/kernel_families.def; without one, an
// elementwise op's scalar expression, interpreted (cpu_scalar_expr.cpp), and
// for any other op nullptr: not run here (see supports()). A lookup of the
// rows rather than a switch, so that an elementwise op needs no row.
KernelFn kernel_of(OpId op) {
#define FSDPC_KERNEL(id, kernel) \
  if (op == OpId::id) return holds_bf16(op) ? kernel : in_f32<kernel>;
#define FSDPC_CPU_ONLY_KERNEL FSDPC_KERNEL
#include "executors/kernel_families.def"
#undef FSDPC_KERNEL
  return op_info(op).category == OpCategory::elementwise ? in_f32<expr_kernel> : nullptr;
}

// The dtypes of the hand-written elementwise kernels (cpu_elementwise.cpp).
bool hand_written_supports(OpId op, DType d) {
  for (OpId id : {OpId::Neg, OpId::Add, OpId::Sub, OpId::Mul, OpId::Maximum})
    if (op == id) return is_one_of(d, {DType::f32, DType::i32, DType::i64});
  for (OpId id : {OpId::Eq, OpId::Ne, OpId::Lt, OpId::Le, OpId::Gt, OpId::Ge})
    if (op == id) return d == DType::boolean;  // operands: any CPU dtype, checked by the kernel
  if (op == OpId::ConvertElementType || op == OpId::Where) return is_cpu_dtype(d);
  return d == DType::f32;  // the math functions, div and pow
}

// Whether the op runs here for outputs of dtype d.
bool supports(OpId op, DType d) {
  if (d == DType::bf16 && !holds_bf16(op)) d = DType::f32;  // what its kernel sees (in_f32)
  switch (op) {
    FSDPC_ELEMENTWISE_CASES
      return kernel_of(op) == in_f32<expr_kernel> ? runs_generated(op, d) : hand_written_supports(op, d);
    FSDPC_REDUCTION_CASES
    FSDPC_COMPOSITE_CASES  // linear and attention also in bf16: holds_bf16()
    FSDPC_MATMUL_CASES
      return d == DType::f32 || d == DType::bf16;
    case OpId::IndexAdd:
      return is_one_of(d, {DType::f32, DType::i32, DType::i64});
    case OpId::Iota:
      return is_one_of(d, {DType::f32, DType::f64, DType::i32, DType::i64});
    FSDPC_SHAPE_CASES
    FSDPC_BUFFER_CASES
    case OpId::Take: case OpId::Full:
      return is_cpu_dtype(d);
    // Not run here: synchronize, the collectives, wait, axis_index, del (the runtime and MPI);
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

  // The fused head's [chunk, V] block (executors/cpu/cpu_head.h). Attention's
  // blocks and the gemms' packed operands are still per-thread buffers
  // (scratch_floats), outside the memory plan.
  int64_t scratch_bytes(const BoundSymbol& b, const std::vector<const TensorType*>& in) const override {
    for (OpId id : {OpId::LinearCrossEntropy, OpId::LinearCrossEntropyGrad, OpId::LinearCrossEntropyWithGrad,
                    OpId::LinearCrossEntropyStats, OpId::LinearCrossEntropyStatsGrad})
      if (b.op == id) return cpu::head_scratch(b, *in.at(0), *in.at(1)).bytes;
    return 0;
  }
};

}  // namespace

const Executor& cpu_executor() {
  static const CpuExecutor executor;
  return executor;
}

namespace cpu {

bool is_cpu_dtype(DType d) {
  return is_one_of(d, {DType::f32, DType::bf16, DType::f64, DType::i32, DType::i64, DType::i8, DType::boolean});
}

void require_f32(const BoundSymbol& b, const TensorView& v, const char* what) {
  if (v.type->dtype != DType::f32)
    fail("cpu_", op_name(b.op), ": ", what, " is ", dtype_name(v.type->dtype), shape_str(v.type->shape),
         "; the CPU executor computes this op in f32 only");
}

DType product_dtype(const BoundSymbol& b, std::initializer_list<NamedView> views) {
  const DType d = views.begin()->v.type->dtype;
  for (const NamedView& n : views)
    if (n.v.type->dtype != d || (d != DType::f32 && d != DType::bf16))
      fail("cpu_", op_name(b.op), ": ", n.what, " is ", dtype_name(n.v.type->dtype), shape_str(n.v.type->shape),
           "; the CPU executor computes this op with every operand in f32, or every operand in bf16 (",
           views.begin()->what, " is ", dtype_name(d), ")");
  return d;
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
