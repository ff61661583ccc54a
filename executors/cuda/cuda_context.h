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
//
// Host waits. Every place the host waits for the device (a host copy, the
// clipping norm, the end of a step, a free) goes through wait_idle(), which
// polls (host_wait.h) instead of blocking; NcclContext overrides it to check
// its communicators and its timeout between polls, and to abort them before
// anything else can synchronise the device. Nothing here calls
// cudaStreamSynchronize, cudaDeviceSynchronize or a synchronous cudaMemcpy.
//
// Scratch. Kernels take temporaries with scratch(): from the rank's
// accounting allocator when one is attached (executors/scratch_pool.h),
// else stream-ordered from the device's default pool, whose release
// threshold is raised so it does not unmap at every synchronisation.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>

#include "executors/cuda/host_wait.h"
#include "executors/executor.h"
#include "executors/scratch_pool.h"

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
  // loss, tests), through wait_idle().
  void synchronize() { wait_idle(Streams::both, "both streams"); }

  enum class Streams { compute, both };
  // The one host wait (see the top of this file): returns once the streams
  // are idle. `what` names what the host is waiting for, in messages. Here
  // without a deadline, aborting on a device error.
  virtual void wait_idle(Streams which, const char* what);
  // Before cudaFree (which synchronises the whole device): waits for both
  // streams, or quiesces while an exception unwinds.
  void before_free();
  // Teardown: brings both streams to rest without throwing or aborting the
  // process; NcclContext aborts communicators that cannot finish.
  virtual void quiesce() noexcept;

  // `bytes` of device memory for a kernel's temporaries, usable on the
  // compute stream (and on comm after comm_after_compute()); held until the
  // handle is dropped, which may be right after enqueuing the work that uses
  // it. Throws fsdpc::Error when the device or the cap has no room.
  std::shared_ptr<void> scratch(size_t bytes, bool communication = false);
  virtual void use_scratch_pool(ScratchPool* pool) { pool_ = pool; }

 protected:
  // One poll of the streams for poll_until_ready(): ready, busy, or failed
  // with the runtime's error in `why`.
  PollState poll_streams(Streams which, std::string& why) const;

 private:
  ScratchPool* pool_ = nullptr;
  CudaOptions options_;
  cudaStream_t compute_ = nullptr, comm_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
};

// A stream or event query's answer: cudaSuccess when done,
// cudaErrorNotReady when not, else the error. Like PyTorch's stream query,
// it clears a not-ready the runtime may have recorded as its last error, so
// the next launch check (FSDPC_CUDA_CHECK_LAUNCH) does not take it for its own.
cudaError_t settled(cudaError_t rc);

// The CudaContext a kernel was given; an internal error when the runtime
// passed another kind (a CPU context to a CUDA kernel).
CudaContext& cuda_context(KernelContext& ctx);

}  // namespace fsdpc::cuda
