// poll_until_ready (host_wait.h).
#include "executors/cuda/host_wait.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace fsdpc::cuda {

WaitResult poll_until_ready(const std::function<PollState(std::string& why)>& poll,
                            const std::function<std::string()>& check, double seconds) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto nap = std::chrono::microseconds(5);
  WaitResult r;
  for (;;) {
    ++r.polls;
    switch (poll(r.why)) {
      case PollState::ready: r.kind = WaitResult::ready; return r;
      case PollState::failed: r.kind = WaitResult::failed; return r;
      case PollState::busy: break;
    }
    if (check) {
      r.why = check();
      if (!r.why.empty()) {
        r.kind = WaitResult::failed;
        return r;
      }
    }
    if (std::chrono::duration<double>(Clock::now() - start).count() >= seconds) {
      r.kind = WaitResult::timeout;
      return r;
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(1000));
  }
}

}  // namespace fsdpc::cuda
