// The polling host wait (executors/cuda/host_wait.h) with fake polls, no GPU:
// it returns when the poll says ready, stops on a poll's or a check's
// failure with its message, and gives up at the deadline; the device's
// waits under the NCCL watchdog are built on it.
#include <catch2/catch.hpp>

#include <functional>
#include <string>

#include "executors/cuda/host_wait.h"

using namespace fsdpc::cuda;

namespace {

// Busy for `busy` polls, then `last`.
struct FakePoll {
  int busy = 0;
  PollState last = PollState::ready;
  int calls = 0;
  PollState operator()(std::string& why) {
    if (++calls <= busy) return PollState::busy;
    if (last == PollState::failed) why = "the compute stream reported cudaErrorIllegalAddress";
    return last;
  }
};

}  // namespace

TEST_CASE("host wait: returns once the device is idle, polling in between", "[cuda][host_wait]") {
  FakePoll poll{3, PollState::ready};
  int checks = 0;
  const WaitResult r = poll_until_ready(std::ref(poll), [&] { ++checks; return std::string(); }, kNoDeadline);
  CHECK(r.kind == WaitResult::ready);
  CHECK(r.polls == 4);
  CHECK(poll.calls == 4);
  CHECK(checks == 3);  // between polls, not after the last
}

TEST_CASE("host wait: a device error ends the wait with the runtime's message", "[cuda][host_wait]") {
  FakePoll poll{2, PollState::failed};
  const WaitResult r = poll_until_ready(std::ref(poll), {}, kNoDeadline);
  CHECK(r.kind == WaitResult::failed);
  CHECK(r.why == "the compute stream reported cudaErrorIllegalAddress");
}

TEST_CASE("host wait: an asynchronous error seen between polls ends a wait that would never finish",
          "[cuda][host_wait]") {
  FakePoll poll{1 << 30, PollState::ready};  // never idle: a collective whose peer is gone
  int checks = 0;
  const WaitResult r = poll_until_ready(
      std::ref(poll),
      [&] { return ++checks < 5 ? std::string() : std::string("group dp reported remote process exited"); },
      kNoDeadline);
  CHECK(r.kind == WaitResult::failed);
  CHECK(r.why == "group dp reported remote process exited");
  CHECK(checks == 5);
  CHECK(poll.calls == 5);
}

TEST_CASE("host wait: a device that never becomes idle times out", "[cuda][host_wait]") {
  FakePoll poll{1 << 30, PollState::ready};
  const WaitResult r = poll_until_ready(std::ref(poll), [] { return std::string(); }, 0.02);
  CHECK(r.kind == WaitResult::timeout);
  CHECK(r.why.empty());
  CHECK(r.polls > 1);
  // A zero deadline still polls once: an idle device is never a timeout.
  FakePoll idle{0, PollState::ready};
  CHECK(poll_until_ready(std::ref(idle), {}, 0).kind == WaitResult::ready);
}
