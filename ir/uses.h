// How many times each value is read: by a statement's inputs at any depth
// (a composite's decomposition and a fusion region's statements included)
// and by the returns. What the peephole passes ask before they fold a value
// into its one use (widen, scatter_into).
#pragma once

#include <string>
#include <unordered_map>

#include "ir/trace.h"

namespace fsdpc {

std::unordered_map<std::string, int> use_counts(const Trace& trace);

}  // namespace fsdpc
