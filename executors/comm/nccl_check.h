// FSDPC_NCCL_CHECK: every NCCL call's return code is checked (docs/design.md
// "Errors"), as FSDPC_CUDA_CHECK and FSDPC_MPI_CHECK do for theirs.
#pragma once

#include <nccl.h>

#include "ir/error.h"

namespace fsdpc::detail {

// A failed NCCL call is an internal error: what a user can get wrong (a
// trace's `size`, a dtype) is checked before the call and raised as
// fsdpc::Error there. After a failure the peers may already be inside the
// same collective, so unwinding would hang the job; aborting lets mpirun
// take every rank down. ncclGetLastError(nullptr) adds NCCL's own account
// of the last failure on this thread (often naming the peer or the CUDA call).
[[noreturn]] inline void nccl_call_failed(const char* file, int line, const char* call, ncclResult_t code) {
  const char* last = ncclGetLastError(nullptr);
  CheckFailure(file, line, call).stream() << "returned " << static_cast<int>(code) << " ("
                                          << ncclGetErrorString(code) << ")"
                                          << (last && *last ? ": " : "") << (last ? last : "");
  __builtin_unreachable();  // ~CheckFailure aborts
}

}  // namespace fsdpc::detail

// Runs `call` once; on a result other than ncclSuccess aborts with file:line,
// the call's text, ncclGetErrorString and ncclGetLastError.
#define FSDPC_NCCL_CHECK(call)                                                     \
  do {                                                                             \
    const ncclResult_t fsdpc_nccl_rc_ = (call);                                    \
    if (fsdpc_nccl_rc_ != ncclSuccess)                                             \
      ::fsdpc::detail::nccl_call_failed(__FILE__, __LINE__, #call, fsdpc_nccl_rc_); \
  } while (0)
