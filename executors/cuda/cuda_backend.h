// The CUDA DeviceBackend (executors/device_backend.h): device memory from
// cudaMalloc, host copies and the step's flat-array loops (gradient
// accumulation, clipping, SGD and AdamW) as kernels on the compute stream of
// a CudaContext, so they are ordered after the backward that produced the
// gradients without a host synchronisation.
#pragma once

#include <memory>

#include "executors/cuda/cuda_context.h"
#include "executors/device_backend.h"

namespace fsdpc::cuda {

std::unique_ptr<DeviceBackend> make_cuda_backend(CudaContext& context);

}  // namespace fsdpc::cuda
