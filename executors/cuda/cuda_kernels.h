// Private to executors/cuda/: the KernelFn of each op family. Each family
// has its device code in kernels/<family>.cu, behind a small header that
// declares only its launch functions (plain pointers, sizes and a stream,
// so host files never include device code), and its KernelFns here, in
// cuda_<family>.cpp, which read the bound symbol's attributes, plan the
// launch on the host and call the launch functions on the compute stream.
//
// Kernels never synchronise the host; they check every launch
// (FSDPC_CUDA_CHECK_LAUNCH) and skip empty tensors. Float ops compute in
// f32 whatever the storage (f32 or bf16).
#pragma once

#include <vector>

#include "executors/executor.h"

namespace fsdpc::cuda {

using Views = std::vector<TensorView>;

#define FSDPC_CUDA_KERNEL(name)                                                             \
  void name([[maybe_unused]] KernelContext& ctx, [[maybe_unused]] const BoundSymbol& b, \
            [[maybe_unused]] const Views& in, [[maybe_unused]] const Views& out)

// cuda_elementwise.cpp (kernels/elementwise.cu)
FSDPC_CUDA_KERNEL(unary_kernel);    // neg exp log tanh sqrt rsqrt
FSDPC_CUDA_KERNEL(convert_kernel);  // convert_element_type
FSDPC_CUDA_KERNEL(binary_kernel);   // add sub mul div pow maximum
FSDPC_CUDA_KERNEL(compare_kernel);  // eq ne lt le gt ge
FSDPC_CUDA_KERNEL(where_kernel);
// cuda_reduce.cpp (kernels/reduce.cu)
FSDPC_CUDA_KERNEL(reduce_kernel);  // sum amax
// cuda_shape.cpp (kernels/copy.cu)
FSDPC_CUDA_KERNEL(reshape_kernel);
FSDPC_CUDA_KERNEL(permute_kernel);
FSDPC_CUDA_KERNEL(broadcast_in_dim_kernel);
FSDPC_CUDA_KERNEL(slice_kernel);
FSDPC_CUDA_KERNEL(pad_kernel);
FSDPC_CUDA_KERNEL(cat_kernel);
FSDPC_CUDA_KERNEL(full_kernel);
FSDPC_CUDA_KERNEL(iota_kernel);
FSDPC_CUDA_KERNEL(pack_kernel);
FSDPC_CUDA_KERNEL(unpack_kernel);
// cuda_quantize.cpp (kernels/quantize.cu)
FSDPC_CUDA_KERNEL(quantize_kernel);
FSDPC_CUDA_KERNEL(dequantize_kernel);
// cuda_index.cpp (kernels/index.cu)
FSDPC_CUDA_KERNEL(take_kernel);       // embedding gather
FSDPC_CUDA_KERNEL(index_add_kernel);  // its scatter-add
// cuda_matmul.cpp (cuBLASLt)
FSDPC_CUDA_KERNEL(matmul_kernel);
FSDPC_CUDA_KERNEL(linear_kernel);
// cuda_nn.cpp (kernels/gelu.cu, softmax.cu, layer_norm.cu, cross_entropy.cu, silu.cu,
// rms_norm.cu)
FSDPC_CUDA_KERNEL(gelu_kernel);
FSDPC_CUDA_KERNEL(softmax_kernel);
FSDPC_CUDA_KERNEL(layer_norm_kernel);
FSDPC_CUDA_KERNEL(cross_entropy_kernel);
FSDPC_CUDA_KERNEL(silu_kernel);
FSDPC_CUDA_KERNEL(rms_norm_kernel);
// cuda_head.cpp (cuBLASLt and kernels/linear_cross_entropy.cu): the fused
// head and tp's vocabulary slice of it
FSDPC_CUDA_KERNEL(linear_cross_entropy_kernel);
FSDPC_CUDA_KERNEL(linear_cross_entropy_grad_kernel);
FSDPC_CUDA_KERNEL(linear_cross_entropy_with_grad_kernel);
FSDPC_CUDA_KERNEL(linear_cross_entropy_stats_kernel);
FSDPC_CUDA_KERNEL(linear_cross_entropy_stats_grad_kernel);
// cuda_attention.cpp (cuBLAS's cublasGemmStridedBatchedEx and kernels/softmax.cu)
FSDPC_CUDA_KERNEL(sdpa_kernel);

}  // namespace fsdpc::cuda
