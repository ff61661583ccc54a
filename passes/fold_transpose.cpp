// fold_transposes(): finds the permutes only matmuls read, and rebuilds each
// such matmul as a region holding its permutes; the permutes leave their
// places.
#include "passes/fold_transpose.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "passes/del.h"

namespace fsdpc {

namespace {

bool is_collective(const BoundSymbol& b) { return op_info(b.op).category == OpCategory::collective; }

bool foldable_permute(const BoundSymbol& b, const std::string& executor) {
  return b.op == OpId::Permute && b.executor == executor && b.outputs.size() == 1 &&
         (b.output().type.dtype == DType::f32 || b.output().type.dtype == DType::bf16) &&
         swaps_last_two(b.attrs.get_ints("dims"));
}

BoundSymbol region_of(const std::vector<const BoundSymbol*>& permutes, const BoundSymbol& matmul) {
  BoundSymbol f;
  f.op = OpId::Fusion;
  f.executor = matmul.executor;
  std::unordered_set<std::string> inside, seen;
  std::vector<BoundSymbol> subs;
  auto take = [&](const BoundSymbol& s) {
    for (const Operand& in : s.inputs)
      if (!in.is_scalar() && !inside.count(in.name) && seen.insert(in.name).second) f.inputs.push_back(in);
    inside.insert(s.outputs[0].name);
    subs.push_back(s);
    subs.back().executor.clear();
  };
  for (const BoundSymbol* p : permutes) take(*p);
  take(matmul);
  f.outputs = matmul.outputs;
  f.subsymbols = SubSymbols(std::move(subs));
  return f;
}

}  // namespace

bool swaps_last_two(const IntList& dims) {
  const size_t r = dims.size();
  if (r < 2) return false;
  for (size_t i = 0; i + 2 < r; ++i)
    if (dims[i] != static_cast<int64_t>(i)) return false;
  return dims[r - 2] == static_cast<int64_t>(r - 1) && dims[r - 1] == static_cast<int64_t>(r - 2);
}

bool folds_transposes(Target target) {
  switch (target) {
    case Target::cpu: return true;    // oneDNN's matmul takes strided operands
    case Target::cuda: return false;  // the CUDA executor keeps its permutes
  }
  return false;
}

Trace fold_transposes(Trace trace, Target target) {
  // The target's compute executor, as claim wrote it on each statement.
  const std::string executor(target_name(target));
  // The statements move from the input into the output.
  std::vector<BoundSymbol> in = std::move(trace.bsyms);
  trace.bsyms.clear();
  std::vector<BoundSymbol*> body;
  body.reserve(in.size());
  for (BoundSymbol& b : in)
    if (b.op != OpId::Del) body.push_back(&b);
  std::unordered_map<std::string, std::vector<size_t>> users;  // distinct statements reading each value
  for (size_t i = 0; i < body.size(); ++i)
    for (const Operand& in : body[i]->inputs) {
      if (in.is_scalar()) continue;
      std::vector<size_t>& u = users[in.name];
      if (u.empty() || u.back() != i) u.push_back(i);
    }
  std::vector<std::string> returned_names;
  trace.returns.collect_names(returned_names);
  const std::unordered_set<std::string> returned(returned_names.begin(), returned_names.end());
  // Collectives and waits seen so far, to tell whether one lies between two statements.
  std::vector<int> collectives_before(body.size() + 1, 0);
  for (size_t i = 0; i < body.size(); ++i) collectives_before[i + 1] = collectives_before[i] + is_collective(*body[i]);

  std::vector<bool> folded(body.size(), false);
  std::map<size_t, std::vector<const BoundSymbol*>> into;  // matmul -> its permutes, in trace order
  for (size_t i = 0; i < body.size(); ++i) {
    const BoundSymbol& p = *body[i];
    if (!foldable_permute(p, executor)) continue;
    const std::string& name = p.output().name;
    auto u = users.find(name);
    // One reader: a second matmul would need its own copy of the permute.
    if (returned.count(name) || u == users.end() || u->second.size() != 1) continue;
    const size_t j = u->second[0];
    const BoundSymbol& m = *body[j];
    if (m.op != OpId::Matmul || m.executor != executor) continue;
    if (collectives_before[j] != collectives_before[i + 1]) continue;
    folded[i] = true;
    into[j].push_back(&p);
  }
  if (into.empty()) {
    trace.bsyms = std::move(in);
    return trace;
  }

  const std::string provenance = trace.provenance;
  Trace out = std::move(trace);
  out.bsyms.reserve(body.size());
  for (size_t i = 0; i < body.size(); ++i) {
    if (folded[i]) continue;
    auto it = into.find(i);
    if (it == into.end()) out.bsyms.push_back(std::move(*body[i]));
    else out.bsyms.push_back(region_of(it->second, *body[i]));
  }
  Trace placed = insert_dels(out);
  placed.provenance = provenance;
  return placed;
}

std::optional<TransposedMatmul> transposed_matmul(const BoundSymbol& region) {
  if (region.op != OpId::Fusion || region.subsymbols.empty()) return std::nullopt;
  const std::vector<BoundSymbol>& subs = region.subsymbols;
  const BoundSymbol& m = subs.back();
  if (m.op != OpId::Matmul || m.inputs.size() != 2) return std::nullopt;
  std::unordered_map<std::string, std::string> transposed_from;  // permute output -> its input
  for (size_t i = 0; i + 1 < subs.size(); ++i) {
    const BoundSymbol& p = subs[i];
    if (p.op != OpId::Permute || !swaps_last_two(p.attrs.get_ints("dims"))) return std::nullopt;
    transposed_from[p.outputs[0].name] = p.inputs[0].name;
  }
  auto input_index = [&](const std::string& name) -> std::optional<size_t> {
    for (size_t i = 0; i < region.inputs.size(); ++i)
      if (!region.inputs[i].is_scalar() && region.inputs[i].name == name) return i;
    return std::nullopt;
  };
  TransposedMatmul t;
  size_t* index[2] = {&t.a, &t.b};
  bool* transposed[2] = {&t.a_transposed, &t.b_transposed};
  for (int k = 0; k < 2; ++k) {
    std::string name = m.inputs[k].name;
    if (auto p = transposed_from.find(name); p != transposed_from.end()) {
      *transposed[k] = true;
      name = p->second;
    }
    const std::optional<size_t> i = input_index(name);
    if (!i) return std::nullopt;
    *index[k] = *i;
  }
  return t;
}

}  // namespace fsdpc
