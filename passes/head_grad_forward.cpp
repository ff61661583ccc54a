// head_grad_forward(): one walk that finds each loss statement by its
// operands, one that pairs each gradient reading the cotangent with its
// loss, and one that writes the trace with the pair as one statement.
#include "passes/head_grad_forward.h"

#include <functional>
#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "ir/builder.h"
#include "passes/grad.h"

namespace fsdpc {

namespace {

// What makes a loss statement and its gradient a pair: h, w, targets and
// the chunk the gradient copied from the loss.
using HeadKey = std::tuple<std::string, std::string, std::string, int64_t>;

HeadKey key_of(const BoundSymbol& b) {
  return {b.inputs[0].name, b.inputs[1].name, b.inputs[2].name, b.attrs.get_int_or("chunk", 0)};
}

bool tensors(const BoundSymbol& b, size_t n) {
  if (b.inputs.size() < n) return false;
  for (size_t i = 0; i < n; ++i)
    if (b.inputs[i].is_scalar()) return false;
  return true;
}

}  // namespace

Trace head_grad_forward(const Trace& trace) {
  bool has_cotangent = false;
  for (const Proxy& a : trace.args) has_cotangent = has_cotangent || a.name == kCotangentArg;
  if (!has_cotangent) return trace;

  std::map<HeadKey, size_t> loss_at;
  for (size_t i = 0; i < trace.bsyms.size(); ++i) {
    const BoundSymbol& b = trace.bsyms[i];
    if (b.op == OpId::LinearCrossEntropy && tensors(b, 3)) loss_at.emplace(key_of(b), i);
  }
  std::unordered_map<size_t, size_t> grad_of;  // loss statement -> its gradient's
  for (size_t i = 0; i < trace.bsyms.size(); ++i) {
    const BoundSymbol& b = trace.bsyms[i];
    if (b.op != OpId::LinearCrossEntropyGrad || !tensors(b, 4) || b.inputs[3].name != kCotangentArg) continue;
    auto loss = loss_at.find(key_of(b));
    if (loss != loss_at.end() && loss->second < i) grad_of.emplace(loss->second, i);
  }
  if (grad_of.empty()) return trace;

  std::vector<bool> dropped(trace.bsyms.size(), false);
  for (const auto& [loss, grad] : grad_of) dropped[grad] = true;
  Trace out = without_statements(trace, "head_grad_forward");
  TraceBuilder b(out);
  for (size_t i = 0; i < trace.bsyms.size(); ++i) {
    if (dropped[i]) continue;
    auto pair = grad_of.find(i);
    if (pair == grad_of.end()) {
      b.append(trace.bsyms[i]);
      continue;
    }
    const BoundSymbol& loss = trace.bsyms[i];
    const BoundSymbol& grad = trace.bsyms[pair->second];
    b.emit_named(OpId::LinearCrossEntropyWithGrad, grad.inputs, grad.attrs,
                 {loss.outputs[0].name, grad.outputs[0].name, grad.outputs[1].name});
  }
  return out;
}

Trace without_head_grads(const Trace& forward) {
  bool any = false;
  for (const BoundSymbol& b : forward.bsyms) any = any || b.op == OpId::LinearCrossEntropyWithGrad;
  if (!any) return forward;
  Trace out = without_statements(forward, forward.provenance);
  std::unordered_set<std::string> gradients;  // the with_grad outputs no longer made
  // Whether anything but the gradients (and a compiled forward's frees)
  // reads the cotangent: no model here does, and then it goes.
  bool reads_cotangent = false;
  for (const BoundSymbol& s : forward.bsyms)
    if (s.op != OpId::Del && s.op != OpId::LinearCrossEntropyWithGrad)
      for (const Operand& in : s.inputs) reads_cotangent = reads_cotangent || (!in.is_scalar() && in.name == kCotangentArg);
  TraceBuilder b(out);
  for (const BoundSymbol& s : forward.bsyms) {
    if (s.op == OpId::Del && !reads_cotangent) {
      BoundSymbol kept = s;
      std::erase_if(kept.inputs, [](const Operand& in) { return !in.is_scalar() && in.name == kCotangentArg; });
      if (!kept.inputs.empty()) b.append(std::move(kept));
      continue;
    }
    if (s.op != OpId::LinearCrossEntropyWithGrad) {
      b.append(s);
      continue;
    }
    Attrs attrs;
    if (const AttrValue* chunk = s.attrs.find("chunk")) attrs.set("chunk", *chunk);
    b.emit_named(OpId::LinearCrossEntropy, {s.inputs[0], s.inputs[1], s.inputs[2]}, std::move(attrs),
                 {s.outputs[0].name});
    out.bsyms.back().executor = s.executor;
    gradients.insert({s.outputs[1].name, s.outputs[2].name});
  }
  // The returns without the gradients (a forward returns them among the
  // values saved for the backward).
  std::function<ReturnTree(const ReturnTree&)> keep = [&](const ReturnTree& r) {
    if (!r.is_tuple) return r;
    std::vector<ReturnTree> items;
    for (const ReturnTree& item : r.items)
      if (item.is_tuple || !gradients.count(item.name)) items.push_back(keep(item));
    return ReturnTree::tuple(std::move(items));
  };
  out.returns = keep(forward.returns);
  if (!reads_cotangent)
    std::erase_if(out.args, [](const Proxy& a) { return a.name == kCotangentArg; });
  return out;
}

}  // namespace fsdpc
