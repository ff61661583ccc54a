// widen_accumulation(): rounds until nothing matches. Each round counts
// every value's uses (statements at every depth, and the returns) and marks
// the values computed from the cotangent, then finds each narrow-to-f32
// convert whose input has no other use and is an accumulating op's result
// (the op is rewritten in its place) or an f32 gradient cast down (both
// casts go).
#include "passes/widen_accumulation.h"

#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/builder.h"
#include "ir/meta.h"
#include "ir/uses.h"
#include "passes/grad.h"

namespace fsdpc {

namespace {

bool narrow_float(DType d) { return d == DType::bf16 || d == DType::f16; }

// The ops that sum: a product's dot products, a reduction, a scatter-add,
// and the add that autodiff uses to sum a value's cotangent contributions
// (a tied embedding's gradient is its lookup's plus its head's).
bool accumulates(OpId op) {
  return op == OpId::Matmul || op == OpId::Sum || op == OpId::IndexAdd || op == OpId::Add;
}

bool is_fused_head_grad(OpId op) {
  return op == OpId::LinearCrossEntropyGrad || op == OpId::LinearCrossEntropyStatsGrad;
}

// The fused head's gradient (or a vocabulary slice's): its dw (output 1)
// sums dlogitsᵀ·h over the chunks in f32 and can be written as it is
// (dw_dtype).
bool fused_head_dw(const BoundSymbol& b) {
  return is_fused_head_grad(b.op) && b.outputs.size() == 2 && narrow_float(b.outputs[1].type.dtype) &&
         !b.attrs.has("dw_dtype");
}

// The type meta gives b's output (a distribution follows from its inputs').
TensorType inferred(const BoundSymbol& b, const std::unordered_map<std::string, TensorType>& types) {
  std::vector<OperandType> ins;
  for (const Operand& x : b.inputs) ins.push_back(x.is_scalar() ? OperandType::scalar() : OperandType::of(types.at(x.name)));
  return infer_types(b.op, ins, b.attrs).at(0);
}

// The value x widened to `to`, a fresh statement appended to `out`; its
// type is recorded in `types`.
std::string widened(Trace& out, const Operand& x, DType to, std::unordered_map<std::string, TensorType>& types) {
  BoundSymbol c;
  c.op = OpId::ConvertElementType;
  c.inputs = {x};
  c.attrs.set("dtype", std::string(dtype_name(to)));
  Proxy wide;
  wide.name = out.fresh_name();
  wide.type = inferred(c, types);
  c.outputs = {std::move(wide)};
  out.bsyms.push_back(std::move(c));
  const Proxy& o = out.bsyms.back().output();
  types[o.name] = o.type;
  return o.name;
}

// One round: every pattern in `trace` as it is; nullopt when there is none.
std::optional<Trace> widen_once(const Trace& trace) {
  std::unordered_map<std::string, int> uses = use_counts(trace);

  // Values computed from the loss's cotangent: the backward's.
  std::unordered_set<std::string> gradient = {kCotangentArg};
  for (const BoundSymbol& b : trace.bsyms)
    for (const Operand& in : b.inputs)
      if (!in.is_scalar() && gradient.count(in.name)) {
        for (const Proxy& o : b.outputs) gradient.insert(o.name);
        break;
      }

  std::unordered_map<std::string, TensorType> types;
  for (const Proxy& a : trace.args) types[a.name] = a.type;
  for_each_bsym(trace.bsyms, [&](const BoundSymbol& b) {
    for (const Proxy& o : b.outputs) types[o.name] = o.type;
  });

  // Narrow results of the accumulating ops; casts down of an f32 gradient,
  // by name -> their statement's index; then the index of the convert that
  // is the only use of either.
  std::unordered_set<std::string> producer;
  std::unordered_map<std::string, size_t> rounded;
  std::unordered_map<std::string, size_t> widened_by, round_trip;
  for (size_t i = 0; i < trace.bsyms.size(); ++i) {
    const BoundSymbol& b = trace.bsyms[i];
    const bool one_narrow = b.outputs.size() == 1 && narrow_float(b.output().type.dtype);
    if (one_narrow && accumulates(b.op) &&
        !(b.op == OpId::Matmul && b.attrs.has("out_dtype") && b.attrs.get_dtype("out_dtype") != b.output().type.dtype))
      producer.insert(b.output().name);
    if (fused_head_dw(b)) producer.insert(b.outputs[1].name);
    const bool widens = b.op == OpId::ConvertElementType && b.inputs.size() == 1 && !b.inputs[0].is_scalar() &&
                        b.output().type.dtype == DType::f32;
    if (one_narrow && b.op == OpId::ConvertElementType && !b.inputs[0].is_scalar() &&
        types.at(b.inputs[0].name).dtype == DType::f32 && gradient.count(b.output().name))
      rounded[b.output().name] = i;
    if (!widens) continue;
    const std::string& x = b.inputs[0].name;
    if (uses[x] != 1) continue;
    if (producer.count(x)) widened_by[x] = i;
    if (auto r = rounded.find(x); r != rounded.end()) round_trip[x] = i;
  }
  if (widened_by.empty() && round_trip.empty()) return std::nullopt;

  Trace out = without_statements(trace, "widen");
  std::vector<bool> dropped(trace.bsyms.size(), false);
  for (const auto& [name, i] : widened_by) dropped[i] = true;
  // A gradient rounded to bf16 only to be widened again is its f32 value:
  // both casts go, and the widened value's uses read the f32 one.
  std::unordered_map<std::string, std::string> renamed;
  for (const auto& [name, i] : round_trip) {
    const size_t down = rounded.at(name);
    dropped[down] = dropped[i] = true;
    renamed[trace.bsyms[i].output().name] = trace.bsyms[down].inputs[0].name;
  }
  for (auto& [from, to] : renamed)  // a round trip of a round trip's result
    for (auto next = renamed.find(to); next != renamed.end(); next = renamed.find(to)) to = next->second;
  for (size_t i = 0; i < trace.bsyms.size(); ++i) {
    if (dropped[i]) continue;
    BoundSymbol b = trace.bsyms[i];
    rename_uses(b, renamed);
    if (is_fused_head_grad(b.op) && b.outputs.size() == 2) {
      auto w = widened_by.find(b.outputs[1].name);
      if (w == widened_by.end()) {
        out.bsyms.push_back(std::move(b));
        continue;
      }
      // Emitted again, so that its decomposition (an f32 dw product) is
      // recorded too; later statements read its fresh names.
      b.attrs.set("dw_dtype", std::string(dtype_name(DType::f32)));
      TraceBuilder tb(out);
      const std::vector<Proxy> grads = tb.emit(b.op, b.inputs, b.attrs);
      renamed[b.outputs[0].name] = grads[0].name;
      renamed[trace.bsyms[w->second].output().name] = grads[1].name;
      for (const Proxy& g : grads) types[g.name] = g.type;
      continue;
    }
    auto w = b.outputs.size() == 1 ? widened_by.find(b.output().name) : widened_by.end();
    if (w == widened_by.end()) {
      out.bsyms.push_back(std::move(b));
      continue;
    }
    const BoundSymbol& convert = trace.bsyms[w->second];
    if (b.op == OpId::Matmul) {
      b.attrs.set("out_dtype", std::string(dtype_name(DType::f32)));
    } else {
      // sum's x, add's tensors, or index_add's a and src (idx stays an index).
      for (size_t k = 0; k < b.inputs.size(); ++k) {
        const Operand& x = b.inputs[k];
        if ((b.op == OpId::IndexAdd && k == 1) || x.is_scalar()) continue;
        b.inputs[k] = Operand::of(widened(out, x, DType::f32, types));
      }
    }
    // The convert's name; the type meta gives the rewritten statement,
    // which is the convert's dtype and shape (checked by verify()).
    b.outputs[0] = convert.output();
    b.outputs[0].type = inferred(b, types);
    types[b.outputs[0].name] = b.outputs[0].type;
    out.bsyms.push_back(std::move(b));
  }
  rename_returns(out.returns, renamed);
  return out;
}

}  // namespace

Trace widen_accumulation(const Trace& trace) {
  // A widened input may itself be a pattern (the head's product feeding the
  // add of a tied embedding's gradient): again until nothing matches. Each
  // round removes at least one narrow result, so the rounds end.
  std::optional<Trace> t = widen_once(trace);
  if (!t) return trace;
  while (std::optional<Trace> next = widen_once(*t)) t = std::move(next);
  return *std::move(t);
}

}  // namespace fsdpc
