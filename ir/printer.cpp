// STUB: replaced by the printer work.
#include "ir/printer.h"
namespace fsdpc {
std::string print_trace(const Trace&) { return ""; }
std::string format_double(double v) { return std::to_string(v); }
}  // namespace fsdpc
