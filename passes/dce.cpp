// dce(): one backward walk marks what the returns need; a forward copy keeps
// it, then trims `del` statements to the names that survived.
#include "passes/dce.h"

#include <unordered_set>
#include <utility>

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

Trace dce(Trace trace) {
  const std::vector<bool> keep = live_statements(trace);
  // The kept statements move from the input into the output.
  std::vector<BoundSymbol> in = std::move(trace.bsyms);
  trace.bsyms.clear();
  Trace out = std::move(trace);
  out.provenance = "dce";
  out.bsyms.reserve(in.size());
  std::unordered_set<std::string> exists;
  exists.reserve(out.args.size() + in.size());
  for (const Proxy& a : out.args) exists.insert(a.name);
  for (size_t i = 0; i < in.size(); ++i) {
    BoundSymbol& b = in[i];
    if (b.op != OpId::Del) {
      if (!keep[i]) continue;
      for (const Proxy& o : b.outputs) exists.insert(o.name);
      out.bsyms.push_back(std::move(b));
      continue;
    }
    std::erase_if(b.inputs, [&](const Operand& o) { return !exists.count(o.name); });
    if (!b.inputs.empty()) out.bsyms.push_back(std::move(b));
  }
  return out;
}

}  // namespace fsdpc
