// Creation and teardown of a rank's CUDA resources, its one host wait and
// its scratch; every call checked.
#include "executors/cuda/cuda_context.h"

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

#include "executors/cuda/cuda_check.h"
#include "ir/error.h"

namespace fsdpc::cuda {

cudaError_t settled(cudaError_t rc) {
  if (rc != cudaErrorNotReady) return rc;
  const cudaError_t last = cudaGetLastError();
  return last == cudaSuccess || last == cudaErrorNotReady ? cudaErrorNotReady : last;
}

CudaContext::CudaContext(const CudaOptions& options) : options_(options) {
  FSDPC_CUDA_CHECK(cudaSetDevice(options_.device));
  // Non-blocking: neither stream synchronises with the legacy default
  // stream, which a library call elsewhere in the process might use.
  FSDPC_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
  FSDPC_CUDA_CHECK(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking));
  FSDPC_CUBLAS_CHECK(cublasLtCreate(&lt_));
  if (options_.workspace_bytes) FSDPC_CUDA_CHECK(cudaMalloc(&workspace_, options_.workspace_bytes));
  // Stream-ordered scratch (when no allocator is attached) keeps its memory
  // across synchronisations instead of unmapping it at each (the default
  // threshold is 0); the pool is trimmed when a cudaMalloc fails.
  cudaMemPool_t pool = nullptr;
  FSDPC_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, options_.device));
  uint64_t keep = UINT64_MAX;
  FSDPC_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
}

CudaContext::~CudaContext() {
  // Teardown must not abort while unwinding from another error: report and
  // release what can be released. NcclContext has quiesced already.
  CudaContext::quiesce();
  if (workspace_) (void)cudaFree(workspace_);
  if (lt_) (void)cublasLtDestroy(lt_);
  if (comm_) (void)cudaStreamDestroy(comm_);
  if (compute_) (void)cudaStreamDestroy(compute_);
}

PollState CudaContext::poll_streams(Streams which, std::string& why) const {
  const cudaError_t a = compute_ ? settled(cudaStreamQuery(compute_)) : cudaSuccess;
  const cudaError_t b = which == Streams::both && comm_ ? settled(cudaStreamQuery(comm_)) : cudaSuccess;
  for (cudaError_t rc : {a, b}) {
    if (rc != cudaSuccess && rc != cudaErrorNotReady) {
      why = std::string(rc == a ? "the compute stream" : "the comm stream") + " reported " + cudaGetErrorName(rc) +
            ": " + cudaGetErrorString(rc);
      return PollState::failed;
    }
  }
  return a == cudaSuccess && b == cudaSuccess ? PollState::ready : PollState::busy;
}

void CudaContext::wait_idle(Streams which, const char* what) {
  const WaitResult r = poll_until_ready([&](std::string& why) { return poll_streams(which, why); }, {}, kNoDeadline);
  if (r.kind != WaitResult::ready)
    detail::CheckFailure(__FILE__, __LINE__, "waiting for the device").stream() << what << ": " << r.why;
}

void CudaContext::before_free() {
  if (std::uncaught_exceptions() > 0)
    quiesce();
  else
    wait_idle(Streams::both, "the device's work before freeing memory");
}

void CudaContext::quiesce() noexcept {
  const WaitResult r =
      poll_until_ready([&](std::string& why) { return poll_streams(Streams::both, why); }, {}, kNoDeadline);
  if (r.kind != WaitResult::ready) std::fprintf(stderr, "fsdpc: at teardown, %s\n", r.why.c_str());
}

std::shared_ptr<void> CudaContext::scratch(size_t bytes, bool communication) {
  if (bytes == 0) return nullptr;
  if (pool_) return pool_->scratch(bytes, communication);
  void* p = nullptr;
  cudaError_t rc = cudaMallocAsync(&p, bytes, compute_);
  if (rc == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    fail("out of memory on cuda:", options_.device, " allocating ", bytes, " bytes of kernel scratch");
  }
  FSDPC_CUDA_CHECK(rc);
  // Freed on the compute stream: every use, comm's included, is ordered
  // before the point where the last holder drops it (a collective's staging
  // is dropped after compute has waited for the collective).
  const cudaStream_t s = compute_;
  return std::shared_ptr<void>(p, [s](void* q) { FSDPC_CUDA_CHECK(cudaFreeAsync(q, s)); });
}

CudaContext& cuda_context(KernelContext& ctx) {
  auto* c = dynamic_cast<CudaContext*>(&ctx);
  FSDPC_CHECK(c) << "a CUDA kernel was run without a CudaContext";
  return *c;
}

}  // namespace fsdpc::cuda
