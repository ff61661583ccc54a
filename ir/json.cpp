// STUB: replaced by the JSON work.
#include "ir/json.h"
#include "ir/error.h"
namespace fsdpc {
std::string trace_to_json(const Trace&, int) { return "{}"; }
Trace trace_from_json(std::string_view, std::string_view filename) { fail(filename, ": json not implemented"); }
}  // namespace fsdpc
