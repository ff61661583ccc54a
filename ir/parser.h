// Reads the canonical text form back: parse_trace(print_trace(t)) == t.
#pragma once

#include <string_view>

#include "ir/trace.h"

namespace fsdpc {

// Throws fsdpc::Error "<filename>:<line>: <message>" on malformed text.
// Does not verify; callers run verify() when they want the semantic checks.
Trace parse_trace(std::string_view text, std::string_view filename = "<input>");

}  // namespace fsdpc
