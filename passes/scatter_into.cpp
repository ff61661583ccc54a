// scatter_into(): one walk that counts every value's uses and where each is
// defined, then one that finds each add of a single-use index_add onto
// single-use zeros, and one that writes the trace without the folded
// statements.
#include "passes/scatter_into.h"

#include <optional>
#include <unordered_map>
#include <vector>

#include "ir/meta.h"
#include "ir/uses.h"

namespace fsdpc {

namespace {

// Whether statement i makes zeros: full(value=0), or a cast of a value that does.
bool makes_zeros(const Trace& t, size_t i, const std::unordered_map<std::string, size_t>& def) {
  const BoundSymbol& b = t.bsyms[i];
  if (b.op == OpId::Full) return b.attrs.get_double("value") == 0.0;
  if (b.op != OpId::ConvertElementType || b.inputs[0].is_scalar()) return false;
  auto d = def.find(b.inputs[0].name);
  return d != def.end() && makes_zeros(t, d->second, def);
}

}  // namespace

Trace scatter_into(const Trace& trace) {
  std::unordered_map<std::string, int> uses = use_counts(trace);
  std::unordered_map<std::string, size_t> def;  // top-level statement defining each value
  std::unordered_map<std::string, TensorType> types;
  for (const Proxy& a : trace.args) types[a.name] = a.type;
  for (size_t i = 0; i < trace.bsyms.size(); ++i)
    for (const Proxy& o : trace.bsyms[i].outputs) {
      def[o.name] = i;
      types[o.name] = o.type;
    }
  // The statement defining x when x is read exactly once; its index, or none.
  auto single_use_def = [&](const Operand& x) -> std::optional<size_t> {
    if (x.is_scalar() || uses[x.name] != 1) return std::nullopt;
    auto d = def.find(x.name);
    return d == def.end() ? std::nullopt : std::optional<size_t>(d->second);
  };

  // The add's index -> its replacement; the statements it replaces.
  std::unordered_map<size_t, BoundSymbol> folded;
  std::vector<bool> dropped(trace.bsyms.size(), false);
  for (size_t i = 0; i < trace.bsyms.size(); ++i) {
    const BoundSymbol& add = trace.bsyms[i];
    if (add.op != OpId::Add || add.inputs.size() != 2 || add.outputs.size() != 1) continue;
    for (size_t side = 0; side < 2; ++side) {
      const std::optional<size_t> scatter = single_use_def(add.inputs[side]);
      const Operand& a = add.inputs[1 - side];
      if (!scatter || trace.bsyms[*scatter].op != OpId::IndexAdd || a.is_scalar()) continue;
      if (types.at(a.name) != trace.bsyms[*scatter].output().type) continue;
      const std::optional<size_t> zeros = single_use_def(trace.bsyms[*scatter].inputs[0]);
      if (!zeros || !makes_zeros(trace, *zeros, def)) continue;
      BoundSymbol into = trace.bsyms[*scatter];
      into.inputs[0] = a;
      into.outputs = add.outputs;
      std::vector<OperandType> ins;
      for (const Operand& x : into.inputs) ins.push_back(OperandType::of(types.at(x.name)));
      if (infer_types(into.op, ins, into.attrs).at(0) != add.output().type) continue;
      folded.emplace(i, std::move(into));
      dropped[*scatter] = true;
      // The zeros, and what made them (a cast's full) when used only there.
      for (std::optional<size_t> z = zeros; z;
           z = trace.bsyms[*z].op == OpId::ConvertElementType ? single_use_def(trace.bsyms[*z].inputs[0])
                                                               : std::nullopt)
        dropped[*z] = true;
      break;
    }
  }
  if (folded.empty()) return trace;

  Trace out = without_statements(trace, "scatter_into");
  for (size_t i = 0; i < trace.bsyms.size(); ++i) {
    if (dropped[i]) continue;
    auto f = folded.find(i);
    out.bsyms.push_back(f == folded.end() ? trace.bsyms[i] : std::move(f->second));
  }
  return out;
}

}  // namespace fsdpc
