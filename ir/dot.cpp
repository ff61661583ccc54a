// Graphviz view of a trace's data flow: arguments, top-level bound symbols and
// the return are nodes; each value a consumer reads is one labelled edge from
// its producer. Sub-symbols are not drawn: the view is of what a pass sees.
#include "ir/dot.h"

#include <algorithm>
#include <map>

namespace fsdpc {

namespace {

// Contents of a DOT double-quoted string. Label lines are joined with the
// DOT escape "\n" by the callers, after escaping each line.
std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n' || c == '\r') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string value_line(const Proxy& p) {
  std::string out = p.name + ": " + type_str(p.type);
  if (p.type.dist != DistType::none) out += " " + std::string(dist_name(p.type.dist));
  return escape(out);
}

class DotWriter {
 public:
  explicit DotWriter(const Trace& trace) : trace_(trace) {}
  std::string write();

 private:
  void node(const std::string& id, const std::string& attrs) {
    out_ += "  " + id + " [" + attrs + "];\n";
  }
  // The node producing `name`; a name nothing defines gets a dashed node, so a
  // broken trace still draws.
  std::string producer(const std::string& name);
  void edges_into(const std::string& consumer, const std::vector<std::string>& names);

  const Trace& trace_;
  std::map<std::string, std::string> producers_;  // value name -> node id
  int undefined_ = 0;
  std::string out_;
};

std::string DotWriter::producer(const std::string& name) {
  auto it = producers_.find(name);
  if (it != producers_.end()) return it->second;
  std::string id = "u" + std::to_string(undefined_++);
  node(id, "shape=box, style=dashed, label=\"" + escape(name) + "\\n(undefined)\"");
  producers_[name] = id;
  return id;
}

void DotWriter::edges_into(const std::string& consumer, const std::vector<std::string>& names) {
  std::vector<std::string> seen;
  for (const std::string& n : names) {
    if (std::find(seen.begin(), seen.end(), n) != seen.end()) continue;
    seen.push_back(n);
    out_ += "  " + producer(n) + " -> " + consumer + " [label=\"" + escape(n) + "\"];\n";
  }
}

std::string DotWriter::write() {
  out_ = "digraph \"" + escape(trace_.name) + "\" {\n";
  out_ += "  node [fontname=\"monospace\", fontsize=10];\n";
  out_ += "  edge [fontname=\"monospace\", fontsize=9];\n";
  for (size_t i = 0; i < trace_.args.size(); ++i) {
    const Proxy& a = trace_.args[i];
    std::string id = "a" + std::to_string(i);
    std::string label = value_line(a);
    if (a.is_param())
      label += "\\nparam " + escape(a.param_path) + (a.requires_grad ? "" : " frozen");
    node(id, "shape=box, label=\"" + label + "\"");
    producers_[a.name] = id;
  }
  for (size_t i = 0; i < trace_.bsyms.size(); ++i) {
    const BoundSymbol& b = trace_.bsyms[i];
    std::string id = "n" + std::to_string(i);
    std::string label = escape(symbol_name(b.op, b.executor));
    for (const Proxy& p : b.outputs) label += "\\n" + value_line(p);
    bool comm = op_info(b.op).category == OpCategory::collective;
    node(id, std::string("shape=") +
                 (comm ? "box, style=\"rounded,filled\", fillcolor=lightblue" : "ellipse") +
                 ", label=\"" + label + "\"");
    std::vector<std::string> names;
    for (const Operand& in : b.inputs)
      if (!in.is_scalar()) names.push_back(in.name);
    edges_into(id, names);
    for (const Proxy& p : b.outputs) producers_[p.name] = id;
  }
  node("ret", "shape=doubleoctagon, label=\"return\"");
  std::vector<std::string> returned;
  trace_.returns.collect_names(returned);
  edges_into("ret", returned);
  return out_ + "}\n";
}

}  // namespace

std::string trace_to_dot(const Trace& trace) { return DotWriter(trace).write(); }

}  // namespace fsdpc
