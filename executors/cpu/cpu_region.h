// Private to executors/cpu/: the CPU executor's kernel for `fusion`
// statements. Two kinds of region reach it: a matmul holding the transposes
// it reads in place (passes/fold_transpose.h), run on oneDNN
// (cpu_matmul.cpp), and every other region, compiled by the fusion executor
// (executors/fusion/fusion_kernel.h).
#pragma once

#include "executors/cpu/cpu_kernels.h"
#include "passes/fold_transpose.h"

namespace fsdpc::cpu {

FSDPC_CPU_KERNEL(region_kernel);

// The folded matmul `t` of region `b` (cpu_matmul.cpp).
void run_transposed_matmul(const BoundSymbol& b, const TransposedMatmul& t, const std::vector<TensorView>& in,
                           const std::vector<TensorView>& out);

}  // namespace fsdpc::cpu
