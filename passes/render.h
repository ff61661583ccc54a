// A trace, or several, written in one of the forms fsdpc prints: the text
// the parser reads back, JSON, Graphviz dot or MLIR; or their statistics
// (passes/stats.h). What `fsdpc trace`, `print` and `dump` write.
#pragma once

#include <string>
#include <vector>

#include "ir/trace.h"

namespace fsdpc {

// The forms: text, json, dot, mlir.
const std::vector<std::string>& trace_formats();
// One trace in `format`, one of trace_formats() (anything else: text).
std::string render_trace(const Trace& trace, const std::string& format);
// Several traces one after another, a blank line between them; in json one
// array of them, so that the output stays one JSON document (a lone trace
// is its object alone).
std::string render_traces(const std::vector<const Trace*>& traces, const std::string& format);
// The statistics of each trace instead of its statements: text, a table
// under `# NAME after PASS` each; json, an array of {trace, stage, stats}.
std::string render_trace_stats(const std::vector<const Trace*>& traces, const std::string& format);

}  // namespace fsdpc
