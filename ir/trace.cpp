// Small behaviour of the IR data types: naming and return trees.
#include "ir/trace.h"

#include <charconv>
#include <cmath>

#include "ir/error.h"

namespace fsdpc {

bool Operand::operator==(const Operand& o) const {
  if (name != o.name || scalar.has_value() != o.scalar.has_value()) return false;
  if (!scalar) return true;
  // NaN literals compare equal to themselves so round trips can be checked.
  if (std::isnan(*scalar) && std::isnan(*o.scalar)) return true;
  return *scalar == *o.scalar;
}

SubSymbols::SubSymbols(Vec v) {
  if (!v.empty()) p_ = std::make_shared<Vec>(std::move(v));
}

SubSymbols::SubSymbols(std::initializer_list<BoundSymbol> init) : SubSymbols(Vec(init)) {}

const SubSymbols::Vec& SubSymbols::get() const {
  static const Vec kEmpty;
  return p_ ? *p_ : kEmpty;
}

SubSymbols::Vec& SubSymbols::mut() {
  if (!p_)
    p_ = std::make_shared<Vec>();
  else if (p_.use_count() > 1)
    p_ = std::make_shared<Vec>(*p_);
  return *p_;
}

void SubSymbols::push_back(BoundSymbol b) { mut().push_back(std::move(b)); }

bool SubSymbols::operator==(const SubSymbols& o) const { return p_ == o.p_ || get() == o.get(); }

const Proxy& BoundSymbol::output() const {
  FSDPC_CHECK(outputs.size() == 1) << op_name(op) << " has " << outputs.size() << " outputs";
  return outputs[0];
}

ReturnTree ReturnTree::leaf(std::string n) {
  ReturnTree r;
  r.name = std::move(n);
  return r;
}

ReturnTree ReturnTree::tuple(std::vector<ReturnTree> items) {
  ReturnTree r;
  r.items = std::move(items);
  r.is_tuple = true;
  return r;
}

void ReturnTree::collect_names(std::vector<std::string>& out) const {
  if (!is_tuple) {
    out.push_back(name);
    return;
  }
  for (const ReturnTree& item : items) item.collect_names(out);
}

bool Trace::operator==(const Trace& o) const {
  return name == o.name && provenance == o.provenance && args == o.args && bsyms == o.bsyms &&
         returns == o.returns;
}

std::string Trace::fresh_name(bool future) {
  return (future ? "ft" : "t") + std::to_string(next_id++);
}

namespace {
// The N of "t<N>" or "ft<N>", or -1.
int64_t counter_of(const std::string& name) {
  size_t pos = 0;
  if (name.rfind("ft", 0) == 0)
    pos = 2;
  else if (name.rfind('t', 0) == 0)
    pos = 1;
  else
    return -1;
  if (pos >= name.size()) return -1;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(name.data() + pos, name.data() + name.size(), v);
  if (ec != std::errc() || p != name.data() + name.size()) return -1;
  return v;
}
}  // namespace

Trace without_statements(const Trace& t, std::string provenance) {
  Trace out;
  out.name = t.name;
  out.provenance = std::move(provenance);
  out.args = t.args;
  out.returns = t.returns;
  out.next_id = t.next_id;
  out.bsyms.reserve(t.bsyms.size());
  return out;
}

void Trace::resync_counter() {
  int64_t max_id = -1;
  auto see = [&](const std::string& n) { max_id = std::max(max_id, counter_of(n)); };
  for (const Proxy& a : args) see(a.name);
  for_each_bsym(bsyms, [&](const BoundSymbol& b) {
    for (const Proxy& o : b.outputs) see(o.name);
  });
  next_id = max_id + 1;
}

namespace {
bool uses_any(const BoundSymbol& b, const std::unordered_map<std::string, std::string>& names) {
  for (const Operand& in : b.inputs)
    if (!in.is_scalar() && names.count(in.name)) return true;
  for (const BoundSymbol& sub : b.subsymbols.get())
    if (uses_any(sub, names)) return true;
  return false;
}
}  // namespace

void rename_uses(BoundSymbol& b, const std::unordered_map<std::string, std::string>& names) {
  for (Operand& in : b.inputs) {
    if (in.is_scalar()) continue;
    auto it = names.find(in.name);
    if (it != names.end()) in.name = it->second;
  }
  // Only touch (and so unshare) a decomposition that reads a renamed value.
  bool touches = false;
  for (const BoundSymbol& sub : b.subsymbols.get()) touches = touches || uses_any(sub, names);
  if (touches)
    for (BoundSymbol& sub : b.subsymbols.mut()) rename_uses(sub, names);
}

void rename_returns(ReturnTree& r, const std::unordered_map<std::string, std::string>& names) {
  if (!r.is_tuple) {
    if (auto it = names.find(r.name); it != names.end()) r.name = it->second;
    return;
  }
  for (ReturnTree& item : r.items) rename_returns(item, names);
}

std::string param_proxy_name(const std::string& path) {
  std::string out = "t_";
  for (char c : path) out += (c == '.') ? '_' : c;
  return out;
}

}  // namespace fsdpc
