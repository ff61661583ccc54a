// region_kernel(): a folded matmul runs as the matmul it is; any other
// region is the fusion executor's.
#include "executors/cpu/cpu_region.h"

#include "executors/fusion/fusion_kernel.h"
#include "passes/fold_transpose.h"

namespace fsdpc::cpu {

FSDPC_CPU_KERNEL(region_kernel) {
  if (transposed_matmul(b)) return transposed_matmul_kernel(ctx, b, in, out);
  fusion::fusion_kernel(ctx, b, in, out);
}

}  // namespace fsdpc::cpu
