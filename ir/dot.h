// Graphviz view of a trace's data flow (a view, not parsed back).
#pragma once

#include <string>

#include "ir/trace.h"

namespace fsdpc {

std::string trace_to_dot(const Trace& trace);

}  // namespace fsdpc
