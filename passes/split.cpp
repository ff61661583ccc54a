// split: cuts the joint trace of `grad` into `forward` and `backward`.
//
// Pre:  a joint trace from grad(): returns (outputs..., (gradients)); its args
//       end with `cotangent` (and acc_* for gradient accumulation).
// Post: forward(inputs, params) returns ((outputs...), (saved...));
//       backward(saved..., acc_*..., cotangent) returns (gradients...).
//       The forward holds exactly the statements the outputs depend on.
//       Saved is as little as possible: a value the backward needs is
//       recomputed there instead of saved when it derives from parameters
//       through cheap ops only (broadcast, reshape, permute, slice, convert,
//       creation) — and, with regather_params (zero3), through all_gather +
//       wait, so gathered parameters are never saved and the backward
//       re-gathers each one right before its first use.
//       With options.recomputable (rematerialisation, passes/remat.h), the
//       values named there are recomputed the same way, from what is saved.
//
//   joint:    t1 = wait(all_gather(w)); t2 = linear(x, t1); ...; g = matmul(ct, t1)
//   forward:  ...; return (t2,), (x, w)            # zero3: w saved, not t1
//   backward: ft9 = all_gather(w, ...); t1 = wait(ft9); g = matmul(ct, t1)
#include "passes/split.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"

namespace fsdpc {

namespace {

using NameSet = std::unordered_set<std::string>;

// Worth recomputing in the backward rather than saving: the table's cheap
// ops, and with regather_params the gathers of parameters (is_regather()).
bool is_cheap(OpId op, bool regather) { return op_info(op).has(OpTrait::cheap) || (regather && is_regather(op)); }

struct Joint {
  const Trace& trace;
  std::vector<ReturnTree> outputs;  // the forward's return items
  ReturnTree grads;
  std::unordered_map<std::string, size_t> def;  // name -> statement index
  std::unordered_map<std::string, const Proxy*> arg;
};

Joint analyse(const Trace& t) {
  if (!t.returns.is_tuple || t.returns.items.size() < 2 || !t.returns.items.back().is_tuple)
    fail("split: expected a joint trace returning (outputs..., (gradients)), got another return structure");
  Joint j{t, {t.returns.items.begin(), t.returns.items.end() - 1}, t.returns.items.back(), {}, {}};
  j.def.reserve(t.bsyms.size());
  j.arg.reserve(t.args.size());
  for (size_t i = 0; i < t.bsyms.size(); ++i)
    for (const Proxy& o : t.bsyms[i].outputs) j.def[o.name] = i;
  for (const Proxy& a : t.args) j.arg[a.name] = &a;
  return j;
}

// The statements the forward's outputs depend on.
std::vector<bool> forward_of(const Joint& j) {
  NameSet needed;
  for (const ReturnTree& r : j.outputs) {
    std::vector<std::string> names;
    r.collect_names(names);
    needed.insert(names.begin(), names.end());
  }
  std::vector<bool> fwd(j.trace.bsyms.size(), false);
  for (size_t i = j.trace.bsyms.size(); i-- > 0;) {
    const BoundSymbol& b = j.trace.bsyms[i];
    bool live = false;
    for (const Proxy& o : b.outputs) live = live || needed.count(o.name);
    if (!live) continue;
    fwd[i] = true;
    for (const Operand& in : b.inputs)
      if (!in.is_scalar()) needed.insert(in.name);
  }
  return fwd;
}

}  // namespace

bool is_regather(OpId op) { return op == OpId::AllGather || op == OpId::Wait; }

std::vector<bool> forward_statements(const Trace& joint) { return forward_of(analyse(joint)); }

SplitResult split(const Trace& joint, const SplitOptions& options) {
  const Joint j = analyse(joint);
  const std::vector<bool> fwd = forward_of(j);
  const auto& bsyms = joint.bsyms;

  // Which names each side reads.
  NameSet used_fwd, used_bwd;
  for (size_t i = 0; i < bsyms.size(); ++i)
    for (const Operand& in : bsyms[i].inputs)
      if (!in.is_scalar()) (fwd[i] ? used_fwd : used_bwd).insert(in.name);
  std::vector<std::string> grad_names;
  j.grads.collect_names(grad_names);
  used_bwd.insert(grad_names.begin(), grad_names.end());

  auto forward_defined = [&](const std::string& n) {
    auto it = j.def.find(n);
    return it != j.def.end() && fwd[it->second];
  };

  // free(v): recomputable in the backward from parameters through cheap ops.
  std::unordered_map<std::string, bool> free_memo;
  std::function<bool(const std::string&)> is_free = [&](const std::string& n) -> bool {
    if (auto a = j.arg.find(n); a != j.arg.end()) return a->second->is_param();
    if (auto m = free_memo.find(n); m != free_memo.end()) return m->second;
    const BoundSymbol& b = bsyms.at(j.def.at(n));
    bool ok = is_cheap(b.op, options.regather_params);
    for (const Operand& in : b.inputs) ok = ok && (in.is_scalar() || is_free(in.name));
    return free_memo[n] = ok;
  };

  // Saved: what the backward reads from the forward side, minus what it can
  // recompute; recomputed chains read parameters, which are then saved.
  NameSet saved_set, recompute;
  auto forward_arg = [&](const std::string& n) { return used_fwd.count(n) || !used_bwd.count(n); };
  std::function<void(const std::string&)> need = [&](const std::string& n) {
    if (j.arg.count(n)) {
      if (forward_arg(n)) saved_set.insert(n);  // else a backward-only input (cotangent, acc_*)
      return;
    }
    if (!forward_defined(n)) return;  // defined by the backward itself
    if (!is_free(n) && !(options.recomputable && options.recomputable->count(n))) {
      saved_set.insert(n);
      return;
    }
    if (!recompute.insert(n).second) return;
    for (const Operand& in : bsyms[j.def.at(n)].inputs)
      if (!in.is_scalar()) need(in.name);
  };
  for (const std::string& n : used_bwd) need(n);

  SplitResult r;
  // saved_for_backward in a stable order: arguments, then definitions.
  std::vector<const Proxy*> saved_proxies;
  for (const Proxy& a : joint.args)
    if (saved_set.count(a.name)) saved_proxies.push_back(&a);
  for (size_t i = 0; i < bsyms.size(); ++i)
    for (const Proxy& o : bsyms[i].outputs)
      if (fwd[i] && saved_set.count(o.name)) saved_proxies.push_back(&o);
  for (const Proxy* p : saved_proxies) r.saved.push_back(p->name);

  // The forward trace.
  Trace& f = r.forward;
  f.name = "forward";
  f.provenance = "split";
  for (const Proxy& a : joint.args)
    if (forward_arg(a.name)) f.args.push_back(a);
  f.bsyms.reserve(static_cast<size_t>(std::count(fwd.begin(), fwd.end(), true)));
  for (size_t i = 0; i < bsyms.size(); ++i)
    if (fwd[i]) f.bsyms.push_back(bsyms[i]);
  std::vector<ReturnTree> saved_leaves;
  for (const std::string& n : r.saved) saved_leaves.push_back(ReturnTree::leaf(n));
  f.returns = ReturnTree::tuple({ReturnTree::tuple(j.outputs), ReturnTree::tuple(saved_leaves)});
  f.next_id = joint.next_id;

  // The backward trace: saved values and backward-only arguments in, the
  // recomputed chains placed right before their first use.
  Trace& bw = r.backward;
  bw.name = "backward";
  bw.provenance = "split";
  for (const Proxy* p : saved_proxies) bw.args.push_back(*p);
  for (const Proxy& a : joint.args)
    if (!forward_arg(a.name)) bw.args.push_back(a);
  bw.bsyms.reserve(bsyms.size() - f.bsyms.size() + recompute.size());
  NameSet emitted;
  std::function<void(const std::string&)> materialise = [&](const std::string& n) {
    if (!recompute.count(n) || emitted.count(n)) return;
    const BoundSymbol& b = bsyms[j.def.at(n)];
    for (const Operand& in : b.inputs)
      if (!in.is_scalar()) materialise(in.name);
    for (const Proxy& o : b.outputs) emitted.insert(o.name);
    bw.bsyms.push_back(b);
  };
  for (size_t i = 0; i < bsyms.size(); ++i) {
    if (fwd[i]) continue;
    for (const Operand& in : bsyms[i].inputs)
      if (!in.is_scalar()) materialise(in.name);
    bw.bsyms.push_back(bsyms[i]);
  }
  for (const std::string& n : grad_names) materialise(n);
  bw.returns = j.grads;
  bw.next_id = joint.next_id;
  return r;
}

}  // namespace fsdpc
