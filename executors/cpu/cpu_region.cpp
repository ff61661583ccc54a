// region_kernel(): a folded matmul runs as the matmul it is; any other
// region is the fusion executor's.
#include "executors/cpu/cpu_region.h"

#include "executors/fusion/fusion_kernel.h"

namespace fsdpc::cpu {

FSDPC_CPU_KERNEL(region_kernel) {
  if (const std::optional<TransposedMatmul> t = transposed_matmul(b)) return run_transposed_matmul(b, *t, in, out);
  fusion::fusion_kernel(ctx, b, in, out);
}

}  // namespace fsdpc::cpu
