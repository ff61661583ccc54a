// The canonical text form of a trace (docs/design.md "Text form").
#pragma once

#include <string>

#include "ir/trace.h"

namespace fsdpc {

std::string print_trace(const Trace& trace);

// Shortest text that parses back to exactly `v`; always marks a float
// ("1.0", "1e-05", "inf", "-inf", "nan").
std::string format_double(double v);

}  // namespace fsdpc
