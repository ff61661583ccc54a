// CollectiveExecutor: the claim rule and op -> kernel map of the MPI and NCCL
// executors.
#include "executors/comm/collective_executor.h"

#include "ir/error.h"

namespace fsdpc {

KernelFn CollectiveExecutor::kernel_or_null(OpId op) const {
  for (const CollectiveKernel& k : backend_.kernels)
    if (k.op == op) return k.kernel;
  return nullptr;
}

bool CollectiveExecutor::claims(const BoundSymbol& b) const {
  if (kernel_or_null(b.op) == nullptr || b.outputs.size() != 1) return false;
  const TensorType& t = b.output().type;
  if (t.device.kind != backend_.device || !backend_.moves(t.dtype)) return false;
  // Every reducing collective sums; all_reduce also takes the max (the
  // vocabulary-parallel softmax's), which the kernels implement for it alone.
  if (op_info(b.op).has(OpTrait::reduces)) {
    if (!b.attrs.has("op")) return false;
    const std::string& reduction = b.attrs.get_str("op");
    return (reduction == "sum" || (reduction == "max" && b.op == OpId::AllReduce)) && backend_.reduces(t.dtype);
  }
  return true;
}

KernelFn CollectiveExecutor::kernel(OpId op) const {
  KernelFn k = kernel_or_null(op);
  FSDPC_CHECK(k != nullptr) << "the " << backend_.name << " executor has no kernel for " << op_name(op);
  return k;
}

}  // namespace fsdpc
