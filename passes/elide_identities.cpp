// elide_identities(): one walk to count each future's uses, one to drop the
// identities and rename what used their results, and, when something went,
// one to retype the parameters and re-infer every statement's distribution.
#include "passes/elide_identities.h"

#include <unordered_map>
#include <vector>

#include "ir/meta.h"

namespace fsdpc {

namespace {

// Issued over a group (all_gather, reduce_scatter, all_reduce, broadcast), not
// to one peer.
bool group_collective(OpId op) { return op_info(op).has(OpTrait::issue) && !op_info(op).has(OpTrait::p2p); }

// A collective over one rank: its result is its input (a sum, max or mean of
// one value; a gather or scatter of one block; a broadcast from the only
// member).
bool over_one_rank(const BoundSymbol& b, const std::unordered_map<std::string, const TensorType*>& types) {
  if (!group_collective(b.op) || !b.attrs.has("size") || b.attrs.get_int("size") != 1 || b.inputs.size() != 1 ||
      b.inputs[0].is_scalar() || b.outputs.size() != 1)
    return false;
  auto t = types.find(b.inputs[0].name);
  return t != types.end() && t->second->shape == b.output().type.shape && t->second->dtype == b.output().type.dtype;
}

bool divides_by_one(const BoundSymbol& b, const std::unordered_map<std::string, const TensorType*>& types) {
  if (b.op != OpId::Div || b.inputs.size() != 2 || b.outputs.size() != 1) return false;
  const Operand &x = b.inputs[0], &d = b.inputs[1];
  if (x.is_scalar() || !d.is_scalar() || *d.scalar != 1.0) return false;
  auto t = types.find(x.name);
  if (t == types.end()) return false;
  const TensorType& in = *t->second;
  const TensorType& out = b.output().type;
  return in.shape == out.shape && in.dtype == out.dtype && in.device == out.device && !in.future;
}

}  // namespace

Trace elide_identities(const Trace& trace, const ElideOptions& options) {
  // Uses of each value: a future elided with its wait must have no other.
  std::unordered_map<std::string, int> uses, waits;
  for (const BoundSymbol& b : trace.bsyms)
    for (const Operand& in : b.inputs)
      if (!in.is_scalar()) {
        ++uses[in.name];
        if (b.op == OpId::Wait) ++waits[in.name];
      }
  // Types by name, pointing into `trace`, which outlives the walk.
  std::unordered_map<std::string, const TensorType*> types;
  for (const Proxy& a : trace.args) types[a.name] = &a.type;

  Trace out = without_statements(trace, "elide");  // the statements are appended as kept
  std::unordered_map<std::string, std::string> renamed;  // elided result -> the value it equals
  std::unordered_map<std::string, std::string> future_of;  // elided future -> the collective's input
  std::vector<std::string> gathered;                       // inputs of elided all_gathers
  for (const BoundSymbol& original : trace.bsyms) {
    BoundSymbol b = original;
    rename_uses(b, renamed);
    const std::string& result = b.outputs.size() == 1 ? b.output().name : std::string();
    if (options.collectives && over_one_rank(b, types) && uses[result] == 1 && waits[result] == 1) {
      future_of[b.output().name] = b.inputs[0].name;
      if (b.op == OpId::AllGather) gathered.push_back(b.inputs[0].name);
      continue;
    }
    if (b.op == OpId::Wait && b.inputs.size() == 1 && b.outputs.size() == 1) {
      if (auto f = future_of.find(b.inputs[0].name); f != future_of.end()) {
        renamed[b.output().name] = f->second;
        continue;
      }
    }
    if (divides_by_one(b, types)) {
      renamed[b.output().name] = b.inputs[0].name;
      continue;
    }
    for (const Proxy& o : original.outputs) types[o.name] = &o.type;
    out.bsyms.push_back(std::move(b));
  }
  rename_returns(out.returns, renamed);
  // A shard over a group of one rank is the whole value: the parameters the
  // elided gathers read (directly or through mixed precision's casts) are
  // typed replicated, and the distribution of every statement downstream of
  // a changed type is inferred again (a cast of a whole value is an ordinary
  // value; an all_reduce of one is replicated).
  std::unordered_map<std::string, const BoundSymbol*> defined_by;
  for (const BoundSymbol& b : out.bsyms)
    for (const Proxy& o : b.outputs) defined_by[o.name] = &b;
  while (!gathered.empty()) {
    const std::string name = std::move(gathered.back());
    gathered.pop_back();
    for (Proxy& a : out.args)
      if (a.name == name && a.type.dist == DistType::fully_sharded) a.type.dist = DistType::replicated;
    auto d = defined_by.find(name);
    if (d != defined_by.end() && d->second->op == OpId::ConvertElementType && !d->second->inputs[0].is_scalar())
      gathered.push_back(d->second->inputs[0].name);
  }
  if (out.bsyms.size() == trace.bsyms.size()) return out;
  // Renamed inputs and retyped parameters change what a statement's
  // distribution follows from: every statement's is inferred again.
  std::unordered_map<std::string, TensorType> type_of;
  for (const Proxy& a : out.args) type_of[a.name] = a.type;
  std::vector<OperandType> ins;
  for (BoundSymbol& b : out.bsyms) {
    if (b.op != OpId::Del) {
      ins.clear();
      for (const Operand& in : b.inputs) {
        auto t = in.is_scalar() ? type_of.end() : type_of.find(in.name);
        ins.push_back(t == type_of.end() ? OperandType::scalar() : OperandType::of(t->second));
      }
      const std::vector<TensorType> inferred = infer_types(b.op, ins, b.attrs);
      for (size_t i = 0; i < b.outputs.size() && i < inferred.size(); ++i) b.outputs[i].type.dist = inferred[i].dist;
    }
    for (const Proxy& o : b.outputs) type_of[o.name] = o.type;
  }
  return out;
}

}  // namespace fsdpc
