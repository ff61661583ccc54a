// The CUDA fusion executor's kernel: runs a `fusion` statement
// (passes/fuse.h) as one generated kernel. The region's CUDA source
// (executors/fusion/cuda_codegen.h) is compiled by NVRTC for the device's
// architecture on first use of its signature (executors/fusion/
// nvrtc_compiler.h, cached in the process and under FSDPC_JIT_CACHE),
// loaded with cudaLibraryLoadData (runtime API: the process never links the
// driver library, so it still starts on a machine without one) and launched
// on the compute stream. Not yet run on a GPU: see test/gpu/gpu_fusion_test.cpp.
#pragma once

#include "executors/executor.h"

namespace fsdpc::cuda {

void fusion_kernel(KernelContext& ctx, const BoundSymbol& b, const std::vector<TensorView>& in,
                   const std::vector<TensorView>& out);

// An elementwise op without a hand-written kernel (kernels/elementwise.cu):
// its scalar expression (ir/scalar_exprs.def) generated, compiled and
// launched as a region holding the statement alone, over its elements in
// one flat dimension (fusion::flat_statement), for the dtypes of
// runs_generated() (ir/scalar_expr.h).
void expr_kernel(KernelContext& ctx, const BoundSymbol& b, const std::vector<TensorView>& in,
                 const std::vector<TensorView>& out);

}  // namespace fsdpc::cuda
