// Private to executors/cpu/: the CPU executor's kernel for `fusion`
// statements. Two kinds of region reach it: a matmul holding the transposes
// it reads in place (passes/fold_transpose.h), run on oneDNN
// (cpu_matmul.cpp), and every other region, compiled by the fusion executor
// (executors/fusion/fusion_kernel.h).
#pragma once

#include "executors/cpu/cpu_kernels.h"

namespace fsdpc::cpu {

FSDPC_CPU_KERNEL(region_kernel);
FSDPC_CPU_KERNEL(transposed_matmul_kernel);  // cpu_matmul.cpp

}  // namespace fsdpc::cpu
