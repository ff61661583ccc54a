// The one way the host waits for a device: poll, never block. A blocking
// wait (cudaStreamSynchronize, cudaMemcpy, cudaFree) cannot be interrupted,
// so a collective that never completes would hang the rank before the NCCL
// watchdog could look at it. poll_until_ready() asks "done yet?" with a
// growing nap (5 us to 1 ms), checks for an asynchronous error between polls
// and gives up at a deadline; the caller decides what a failure means
// (NcclContext aborts its communicators first). Plain C++, tested on the CPU
// (test/cuda_host_wait_test.cpp).
#pragma once

#include <functional>
#include <limits>
#include <string>

namespace fsdpc::cuda {

enum class PollState { ready, busy, failed };

struct WaitResult {
  enum Kind { ready, failed, timeout } kind = ready;
  std::string why;  // failed: the poll's or the check's message; timeout: empty
  int polls = 0;
};

constexpr double kNoDeadline = std::numeric_limits<double>::infinity();

// Calls `poll` until it says ready or failed (filling `why`); while it is
// busy, calls `check` (a non-empty answer is a failure) and stops after
// `seconds` of waiting. `check` may be empty.
WaitResult poll_until_ready(const std::function<PollState(std::string& why)>& poll,
                            const std::function<std::string()>& check, double seconds);

}  // namespace fsdpc::cuda
