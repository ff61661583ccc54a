// STUB: replaced by the decomposition work.
#include "ir/decompositions.h"
#include "ir/error.h"
namespace fsdpc {
Proxy decompose(TraceBuilder&, const BoundSymbol& c) {
  fail(op_name(c.op), ": decomposition not implemented");
}
}  // namespace fsdpc
