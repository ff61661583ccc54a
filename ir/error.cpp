// Out-of-line half of FSDPC_CHECK: printing and aborting stay out of headers.
#include "ir/error.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace fsdpc {

namespace {
std::atomic<CheckFailureHook> g_check_failure_hook{nullptr};
}  // namespace

void set_check_failure_hook(CheckFailureHook hook) { g_check_failure_hook.store(hook); }

namespace detail {

CheckFailure::CheckFailure(const char* file, int line, const char* cond) {
  os_ << file << ":" << line << ": internal error: check failed: " << cond << " ";
}

CheckFailure::~CheckFailure() {
  const std::string message = os_.str();
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  // exchange(): a check that fails inside the hook aborts without recursing.
  if (CheckFailureHook hook = g_check_failure_hook.exchange(nullptr)) hook(message.c_str());
  std::abort();
}

}  // namespace detail

}  // namespace fsdpc
