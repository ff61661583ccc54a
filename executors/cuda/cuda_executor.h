// The CUDA executor ("cuda"): kernels for every compute op on tensors that
// live on a CUDA device, in f32 and bf16 (bf16 storage, f32 arithmetic), plus
// pack/unpack of buckets. Matmul and linear run on cuBLASLt. Collectives and
// wait belong to the NCCL executor (executors/comm/nccl_executor.h).
//
// claims() looks at types only, never at a device: the claim pass, golden
// execution traces and `fsdpc dump --executor cuda` work on a machine
// without a GPU. Kernels need a CudaContext (executors/cuda/cuda_context.h).
#pragma once

#include "executors/executor.h"
#include "ir/types.h"

namespace fsdpc {

const Executor& cuda_executor();

namespace cuda {
// Whether the CUDA executor runs `op` with outputs of dtype `d`.
bool supports(OpId op, DType d);
}  // namespace cuda

}  // namespace fsdpc
