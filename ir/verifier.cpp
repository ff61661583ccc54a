// STUB: replaced by the verifier work.
#include "ir/verifier.h"
namespace fsdpc {
void verify(const Trace&) {}
}  // namespace fsdpc
