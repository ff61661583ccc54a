// What CUDA kernels run with: the rank's device, a compute stream, a
// communication stream, a cuBLASLt handle and its workspace. One per rank;
// the NCCL executor's context (executors/comm/nccl_executor.h) extends it
// with the communicators, so one KernelContext serves kernels and
// collectives, as MpiContext does on the CPU.
//
// Streams: every compute kernel runs on `compute`, in trace order; every
// collective on `comm`. A collective first makes `comm` wait for what
// `compute` has been given so far (its input was produced there), and its
// `wait` makes `compute` wait for the collective's event. The host never
// synchronises inside a step (executors/cuda/stream_plan.h).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "executors/executor.h"

namespace fsdpc::cuda {

struct CudaOptions {
  int device = 0;
  // TF32 tensor-core matmuls for f32 (about 8x faster on an H100, 10-bit
  // mantissa products): off by default, so f32 runs match the CPU to 1e-5.
  bool allow_tf32 = false;
  size_t workspace_bytes = size_t{32} << 20;  // cuBLASLt's, as PyTorch sizes it on Hopper
};

class CudaContext : public KernelContext {
 public:
  // Selects the device and creates the streams, the handle and the
  // workspace. Needs a device: aborts with the runtime's message otherwise.
  explicit CudaContext(const CudaOptions& options = {});
  ~CudaContext() override;
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  int device() const { return options_.device; }
  bool allow_tf32() const { return options_.allow_tf32; }
  cudaStream_t compute() const { return compute_; }
  cudaStream_t comm() const { return comm_; }
  cublasLtHandle_t lt() const { return lt_; }
  void* workspace() const { return workspace_; }
  size_t workspace_bytes() const { return options_.workspace_bytes; }
  // Blocks the host until both streams are idle (end of a step, reading a
  // loss, tests).
  void synchronize() const;

 private:
  CudaOptions options_;
  cudaStream_t compute_ = nullptr, comm_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
};

// The CudaContext a kernel was given; an internal error when the runtime
// passed another kind (a CPU context to a CUDA kernel).
CudaContext& cuda_context(KernelContext& ctx);

}  // namespace fsdpc::cuda
