// Traces in the forms fsdpc prints (passes/render.h).
#include "passes/render.h"

#include "ir/dot.h"
#include "ir/json.h"
#include "ir/printer.h"
#include "passes/mlir.h"
#include "passes/stats.h"

namespace fsdpc {

const std::vector<std::string>& trace_formats() {
  static const std::vector<std::string> kFormats = {"text", "json", "dot", "mlir"};
  return kFormats;
}

std::string render_trace(const Trace& trace, const std::string& format) {
  if (format == "json") return trace_to_json(trace) + "\n";
  if (format == "dot") return trace_to_dot(trace);
  if (format == "mlir") return trace_to_mlir(trace);
  return print_trace(trace);
}

std::string render_traces(const std::vector<const Trace*>& traces, const std::string& format) {
  std::string out;
  if (format == "json" && traces.size() > 1) {
    out = "[\n";
    for (size_t i = 0; i < traces.size(); ++i) {
      std::string one = render_trace(*traces[i], format);
      one.pop_back();  // the newline
      out += one + (i + 1 < traces.size() ? ",\n" : "\n");
    }
    return out + "]\n";
  }
  for (size_t i = 0; i < traces.size(); ++i) out += (i ? "\n" : "") + render_trace(*traces[i], format);
  return out;
}

std::string render_trace_stats(const std::vector<const Trace*>& traces, const std::string& format) {
  std::string out = format == "json" ? "[\n" : "";
  for (size_t i = 0; i < traces.size(); ++i) {
    const Trace& t = *traces[i];
    TraceStats st = trace_stats(t);
    if (format == "json") {
      out += "{\"trace\": \"" + t.name + "\", \"stage\": \"" + t.provenance + "\", \"stats\": " +
             stats_json(st) + "}" + (i + 1 < traces.size() ? ",\n" : "\n");
    } else {
      out += (i ? "\n" : "") + std::string("# ") + t.name + " after " + t.provenance + "\n" + stats_text(st);
    }
  }
  return format == "json" ? out + "]\n" : out;
}

}  // namespace fsdpc
