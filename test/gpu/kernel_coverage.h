// The ops each GPU kernel test compares against the CPU executor, as data:
// kernel_coverage_test.cpp checks without a GPU that together they are every
// op of executors/kernel_families.def and every elementwise op, and on a GPU each test's run must
// compare every op it lists (ggml's test-backend-ops rule: no kernel untested).
#pragma once

#include "ir/ops.h"

namespace fsdpc::gpu_test {

// gpu_kernels_test.cpp: every elementwise op, by its kind from the op-sample
// table (test/op_samples.h, no list here), and these reduction, shape,
// indexing, creation and buffer kernels (quantize and dequantize among them).
inline constexpr OpId kComparedByKernelsTest[] = {
    OpId::Sum, OpId::Amax,
    OpId::Reshape, OpId::Permute, OpId::BroadcastInDim, OpId::Slice, OpId::Pad, OpId::Cat,
    OpId::Take, OpId::IndexAdd,
    OpId::Full, OpId::Iota, OpId::Pack, OpId::Unpack, OpId::Quantize, OpId::Dequantize};

// gpu_nn_kernels_test.cpp: matmul and the nn composites' fused kernels, the
// fused head's among them.
inline constexpr OpId kComparedByNnKernelsTest[] = {
    OpId::Matmul, OpId::Linear, OpId::Gelu, OpId::Silu, OpId::Softmax, OpId::LayerNorm, OpId::RmsNorm,
    OpId::ScaledDotProductAttention,
    OpId::CrossEntropy,
    OpId::LinearCrossEntropy, OpId::LinearCrossEntropyGrad, OpId::LinearCrossEntropyWithGrad,
    OpId::LinearCrossEntropyStats, OpId::LinearCrossEntropyStatsGrad};

}  // namespace fsdpc::gpu_test
