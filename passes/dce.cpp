// dce(): one backward walk marks what the returns need; a forward copy keeps
// it, then trims `del` statements to the names that survived.
#include "passes/dce.h"

#include <unordered_set>

namespace fsdpc {

namespace {

// The top-level statements whose outputs are read or returned, found walking
// backward from the returns; `del` is skipped here and decided afterwards.
std::vector<bool> live_statements(const Trace& trace) {
  std::vector<std::string> returned;
  trace.returns.collect_names(returned);
  std::unordered_set<std::string> needed(returned.begin(), returned.end());
  std::vector<bool> keep(trace.bsyms.size(), false);
  for (size_t i = trace.bsyms.size(); i-- > 0;) {
    const BoundSymbol& b = trace.bsyms[i];
    if (b.op == OpId::Del) continue;
    for (const Proxy& out : b.outputs) keep[i] = keep[i] || needed.count(out.name) > 0;
    if (!keep[i]) continue;
    for (const Operand& in : b.inputs)
      if (!in.is_scalar()) needed.insert(in.name);
  }
  return keep;
}

}  // namespace

Trace dce(const Trace& trace) {
  const std::vector<bool> keep = live_statements(trace);
  Trace out = trace;
  out.provenance = "dce";
  out.bsyms.clear();
  std::unordered_set<std::string> exists;
  for (const Proxy& a : trace.args) exists.insert(a.name);
  for (size_t i = 0; i < trace.bsyms.size(); ++i) {
    const BoundSymbol& b = trace.bsyms[i];
    if (b.op != OpId::Del) {
      if (!keep[i]) continue;
      for (const Proxy& o : b.outputs) exists.insert(o.name);
      out.bsyms.push_back(b);
      continue;
    }
    BoundSymbol del = b;
    std::erase_if(del.inputs, [&](const Operand& in) { return !exists.count(in.name); });
    if (!del.inputs.empty()) out.bsyms.push_back(std::move(del));
  }
  return out;
}

}  // namespace fsdpc
