// Creation and teardown of a rank's CUDA resources; every call checked.
#include "executors/cuda/cuda_context.h"

#include "executors/cuda/cuda_check.h"

namespace fsdpc::cuda {

CudaContext::CudaContext(const CudaOptions& options) : options_(options) {
  FSDPC_CUDA_CHECK(cudaSetDevice(options_.device));
  // Non-blocking: neither stream synchronises with the legacy default
  // stream, which a library call elsewhere in the process might use.
  FSDPC_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
  FSDPC_CUDA_CHECK(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking));
  FSDPC_CUBLAS_CHECK(cublasLtCreate(&lt_));
  if (options_.workspace_bytes) FSDPC_CUDA_CHECK(cudaMalloc(&workspace_, options_.workspace_bytes));
}

CudaContext::~CudaContext() {
  // Teardown must not abort while unwinding from another error: report
  // nothing and release what can be released.
  if (compute_) (void)cudaStreamSynchronize(compute_);
  if (comm_) (void)cudaStreamSynchronize(comm_);
  if (workspace_) (void)cudaFree(workspace_);
  if (lt_) (void)cublasLtDestroy(lt_);
  if (comm_) (void)cudaStreamDestroy(comm_);
  if (compute_) (void)cudaStreamDestroy(compute_);
}

void CudaContext::synchronize() const {
  FSDPC_CUDA_CHECK(cudaStreamSynchronize(compute_));
  FSDPC_CUDA_CHECK(cudaStreamSynchronize(comm_));
}

CudaContext& cuda_context(KernelContext& ctx) {
  auto* c = dynamic_cast<CudaContext*>(&ctx);
  FSDPC_CHECK(c) << "a CUDA kernel was run without a CudaContext";
  return *c;
}

}  // namespace fsdpc::cuda
