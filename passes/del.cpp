// insert_dels(): one forward scan finds each value's last use (for the input
// of an async collective: its wait); a second copies the statements and
// places the frees after them.
#include "passes/del.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace fsdpc {

namespace {

// A value the pass may free and where: after statement `after` (-1: before
// the first statement, for unused arguments).
struct Freeable {
  const Proxy* proxy;
  int64_t after;
};

// Every freeable value in definition order, with the index of the statement
// (in `bsyms`, which holds no del) after which it dies.
std::vector<Freeable> freeable_values(const Trace& trace, const std::vector<const BoundSymbol*>& bsyms) {
  std::vector<std::string> returned_names;
  trace.returns.collect_names(returned_names);
  const std::unordered_set<std::string> returned(returned_names.begin(), returned_names.end());
  std::unordered_map<std::string, int64_t> last_use;
  last_use.reserve(trace.args.size() + bsyms.size());
  // An async collective reads (and all_gather/reduce_scatter write through)
  // its input buffer until its wait: the input's last use is the wait.
  std::unordered_map<std::string, const BoundSymbol*> issued_by;  // future -> collective
  for (size_t i = 0; i < bsyms.size(); ++i) {
    for (const Operand& in : bsyms[i]->inputs) {
      if (in.is_scalar()) continue;
      last_use[in.name] = static_cast<int64_t>(i);
      auto c = issued_by.find(in.name);
      if (bsyms[i]->op == OpId::Wait && c != issued_by.end())
        for (const Operand& cin : c->second->inputs)
          if (!cin.is_scalar()) last_use[cin.name] = static_cast<int64_t>(i);
    }
    for (const Proxy& o : bsyms[i]->outputs)
      if (o.type.future) issued_by[o.name] = bsyms[i];
  }

  std::vector<Freeable> out;
  auto consider = [&](const Proxy& p, int64_t defined_at) {
    if (p.is_param() || p.type.future || returned.count(p.name)) return;
    auto it = last_use.find(p.name);
    out.push_back({&p, it == last_use.end() ? defined_at : it->second});
  };
  for (const Proxy& a : trace.args) consider(a, -1);
  for (size_t i = 0; i < bsyms.size(); ++i)
    for (const Proxy& o : bsyms[i]->outputs) consider(o, static_cast<int64_t>(i));
  return out;
}

// Appends the dels of `dying` (definition order kept), one per device in
// order of first appearance.
void emit_dels(const std::vector<const Proxy*>& dying, std::vector<BoundSymbol>& out) {
  std::vector<Device> devices;
  for (const Proxy* p : dying)
    if (std::find(devices.begin(), devices.end(), p->type.device) == devices.end())
      devices.push_back(p->type.device);
  for (const Device& device : devices) {
    BoundSymbol del;
    del.op = OpId::Del;
    for (const Proxy* p : dying)
      if (p->type.device == device) del.inputs.push_back(Operand::of(p->name));
    out.push_back(std::move(del));
  }
}

}  // namespace

Trace insert_dels(const Trace& trace) {
  // What dies where is read from `trace` (const, alive throughout); the
  // statements are copied once, with the trace, and then moved: the pass
  // runs on every lowering, a hundred times per fsdpc advise.
  std::vector<const BoundSymbol*> body;
  body.reserve(trace.bsyms.size());
  for (const BoundSymbol& b : trace.bsyms)
    if (b.op != OpId::Del) body.push_back(&b);
  const std::vector<Freeable> values = freeable_values(trace, body);
  // after + 1 indexes the gap the free goes in: 0 before the first statement.
  std::vector<std::vector<const Proxy*>> dying(body.size() + 1);
  for (const Freeable& v : values) dying[static_cast<size_t>(v.after + 1)].push_back(v.proxy);

  Trace out = trace;
  out.provenance = "del";
  std::vector<BoundSymbol> bsyms = std::move(out.bsyms);
  std::erase_if(bsyms, [](const BoundSymbol& b) { return b.op == OpId::Del; });
  out.bsyms.clear();
  out.bsyms.reserve(bsyms.size() * 2 + 1);
  emit_dels(dying[0], out.bsyms);
  for (size_t i = 0; i < bsyms.size(); ++i) {
    out.bsyms.push_back(std::move(bsyms[i]));
    emit_dels(dying[i + 1], out.bsyms);
  }
  return out;
}

}  // namespace fsdpc
