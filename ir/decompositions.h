// Decompositions of composite ops into prims, written against TraceBuilder.
#pragma once

#include "ir/builder.h"

namespace fsdpc {

// Emits prims (and other composites) computing `composite`'s outputs from
// its inputs into `b` and returns the proxies holding them, one per output.
std::vector<Proxy> decompose(TraceBuilder& b, const BoundSymbol& composite);

}  // namespace fsdpc
