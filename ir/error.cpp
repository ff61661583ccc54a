// Out-of-line half of FSDPC_CHECK: printing and aborting stay out of headers.
#include "ir/error.h"

#include <cstdio>
#include <cstdlib>

namespace fsdpc::detail {

CheckFailure::CheckFailure(const char* file, int line, const char* cond) {
  os_ << file << ":" << line << ": internal error: check failed: " << cond << " ";
}

CheckFailure::~CheckFailure() {
  std::fprintf(stderr, "%s\n", os_.str().c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace fsdpc::detail
