// The two kinds of failure in fsdpc, kept apart (docs/design.md "Errors"):
// fsdpc::Error is a user's mistake and carries a message meant for them;
// FSDPC_CHECK guards internal invariants and aborts with file and line.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace fsdpc {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Builds a message from streamable pieces and throws fsdpc::Error.
template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw Error(os.str());
}

// Called once, with the failed check's message, after it is printed and
// before the process aborts: a distributed run writes its flight recorder
// here (runtime/reliability/watchdog.cpp), in ordinary context, where a SIGABRT handler
// could not safely allocate or write files. Null (the default) does nothing.
using CheckFailureHook = void (*)(const char* message);
void set_check_failure_hook(CheckFailureHook hook);

namespace detail {
// Collects the streamed message of a failed FSDPC_CHECK, then aborts.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* cond);
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return os_; }

 private:
  std::ostringstream os_;
};
}  // namespace detail

}  // namespace fsdpc

#define FSDPC_CHECK(cond) \
  if (cond) {             \
  } else                  \
    ::fsdpc::detail::CheckFailure(__FILE__, __LINE__, #cond).stream()
