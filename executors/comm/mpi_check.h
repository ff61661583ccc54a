// FSDPC_MPI_CHECK: every MPI call's return code is checked (docs/design.md
// "Errors"). Our communicators use MPI_ERRORS_RETURN, so failures reach here.
#pragma once

#include <mpi.h>

#include "ir/error.h"

namespace fsdpc::detail {

// A failed MPI call is an internal error, never an fsdpc::Error: everything a
// user can get wrong (mesh vs. world size, a trace's `size`, a dtype) is
// checked before the call and raised as fsdpc::Error there. Once a call fails,
// the other ranks may be blocked inside the same collective, so unwinding and
// carrying on would hang the job; aborting lets mpirun tear every rank down.
[[noreturn]] inline void mpi_call_failed(const char* file, int line, const char* call, int code) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) text[0] = '\0';
  CheckFailure(file, line, call).stream() << "returned " << code << ": " << text;
  __builtin_unreachable();  // ~CheckFailure aborts
}

}  // namespace fsdpc::detail

// Runs `call` once; on a code other than MPI_SUCCESS aborts with file:line,
// the call's text and MPI_Error_string's message.
#define FSDPC_MPI_CHECK(call)                                                    \
  do {                                                                           \
    const int fsdpc_mpi_rc_ = (call);                                            \
    if (fsdpc_mpi_rc_ != MPI_SUCCESS)                                            \
      ::fsdpc::detail::mpi_call_failed(__FILE__, __LINE__, #call, fsdpc_mpi_rc_); \
  } while (0)
