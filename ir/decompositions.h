// Decompositions of composite ops into prims, written against TraceBuilder.
#pragma once

#include "ir/builder.h"

namespace fsdpc {

// Emits prims computing `composite`'s output from its inputs into `b` and
// returns the proxy holding the result.
Proxy decompose(TraceBuilder& b, const BoundSymbol& composite);

}  // namespace fsdpc
