// FSDPC_CUDA_CHECK, FSDPC_CUBLAS_CHECK, FSDPC_NCCL_CHECK: every CUDA runtime,
// cuBLAS(Lt) and NCCL call is checked (docs/design.md "Errors"). A failed call
// aborts with file:line, the call's text and the library's own error string,
// as FSDPC_MPI_CHECK does: the other ranks may be blocked in a collective
// that will never complete, so unwinding would hang the job.
#pragma once

#include <cublas_api.h>
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "ir/error.h"

namespace fsdpc::detail {

[[noreturn]] inline void cuda_call_failed(const char* file, int line, const char* call, cudaError_t code) {
  CheckFailure(file, line, call).stream() << "returned " << cudaGetErrorName(code) << ": "
                                          << cudaGetErrorString(code);
  __builtin_unreachable();  // ~CheckFailure aborts
}

[[noreturn]] inline void cublas_call_failed(const char* file, int line, const char* call, cublasStatus_t code) {
  CheckFailure(file, line, call).stream() << "returned " << cublasGetStatusName(code) << ": "
                                          << cublasGetStatusString(code);
  __builtin_unreachable();
}

}  // namespace fsdpc::detail

#define FSDPC_CUDA_CHECK(call)                                                    \
  do {                                                                            \
    const cudaError_t fsdpc_cuda_rc_ = (call);                                    \
    if (fsdpc_cuda_rc_ != cudaSuccess)                                            \
      ::fsdpc::detail::cuda_call_failed(__FILE__, __LINE__, #call, fsdpc_cuda_rc_); \
  } while (0)

#define FSDPC_CUBLAS_CHECK(call)                                                      \
  do {                                                                                \
    const cublasStatus_t fsdpc_cublas_rc_ = (call);                                   \
    if (fsdpc_cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                    \
      ::fsdpc::detail::cublas_call_failed(__FILE__, __LINE__, #call, fsdpc_cublas_rc_); \
  } while (0)

// After a kernel launch (<<<>>> returns nothing): a bad configuration shows
// up here, an error inside the kernel at the next synchronising call.
#define FSDPC_CUDA_CHECK_LAUNCH() FSDPC_CUDA_CHECK(cudaGetLastError())
