// JSON, the machine-facing form of a trace; exact round trip with the text.
// nlohmann_json stays out of this header to keep includes light.
#pragma once

#include <string>
#include <string_view>

#include "ir/trace.h"

namespace fsdpc {

std::string trace_to_json(const Trace& trace, int indent = 2);
// Throws fsdpc::Error "<filename>: <message>" on malformed JSON.
Trace trace_from_json(std::string_view text, std::string_view filename = "<input>");

}  // namespace fsdpc
