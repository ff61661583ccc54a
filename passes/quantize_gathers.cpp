// quantize_gathers (quantize_gathers.h): find the parameter gathers, then
// copy the trace with each one's all_gather and wait replaced where they
// stood, so that schedule later moves them as it moves any gather.
#include "passes/quantize_gathers.h"

#include <unordered_map>
#include <unordered_set>

#include "ir/builder.h"
#include "ir/error.h"
#include "ir/quantize.h"

namespace fsdpc {

namespace {

struct Gather {
  std::string source;   // what is quantized: the shard, or a cast's f32 source
  size_t wait = 0;      // the wait statement
  DType dtype{};        // the gathered value's (the old wait's)
};

class QuantizeGathers {
 public:
  explicit QuantizeGathers(const Trace& t) : in_(t) {
    for (size_t i = 0; i < t.bsyms.size(); ++i) {
      for (const Proxy& o : t.bsyms[i].outputs) def_[o.name] = i;
      for (const Operand& x : t.bsyms[i].inputs)
        if (!x.is_scalar()) users_[x.name].push_back(i);
    }
    std::vector<std::string> names;
    t.returns.collect_names(names);
    returned_.insert(names.begin(), names.end());
    for (size_t i = 0; i < t.bsyms.size(); ++i) find(i);
  }

  Trace run() const {
    Trace out = without_statements(in_, "quantize_gathers");
    TraceBuilder b(out);
    std::unordered_map<std::string, std::string> future_of;  // old future -> the quantized gather's
    for (size_t i = 0; i < in_.bsyms.size(); ++i) {
      const BoundSymbol& s = in_.bsyms[i];
      if (dropped_.count(i)) continue;
      if (auto g = gathers_.find(i); g != gathers_.end()) {
        Proxy q = b.emit1(OpId::Quantize, {Operand::of(g->second.source)}, block());
        future_of[s.outputs[0].name] = b.emit1(OpId::AllGather, {Operand::of(q.name)}, s.attrs).name;
        continue;
      }
      if (auto w = waits_.find(i); w != waits_.end()) {
        emit_wait(b, s, future_of.at(s.inputs[0].name), gathers_.at(w->second).dtype);
        continue;
      }
      b.append(s);
    }
    return out;
  }

 private:
  static Attrs block() { return Attrs{{"block", kQuantBlock}}; }

  // The gather at statement i, if it gathers parameters.
  void find(size_t i) {
    const BoundSymbol& s = in_.bsyms[i];
    if (s.op != OpId::AllGather || s.inputs.empty() || s.attrs.get_int("dim") != 0) return;
    const std::string& x = s.inputs[0].name;
    const TensorType& xt = type_of(x);
    if (xt.dist != DistType::fully_sharded || xt.shape.empty() || (xt.dtype != DType::f32 && xt.dtype != DType::bf16))
      return;
    auto u = users_.find(s.outputs[0].name);
    if (u == users_.end() || u->second.size() != 1 || in_.bsyms[u->second[0]].op != OpId::Wait) return;
    Gather g{x, u->second[0], in_.bsyms[u->second[0]].outputs[0].type.dtype};
    // Mixed precision's cast of the shard, read by this gather alone: its
    // f32 source codes more exactly, and the cast goes.
    if (auto d = def_.find(x); d != def_.end()) {
      const BoundSymbol& cast = in_.bsyms[d->second];
      const bool only_here = users_.at(x).size() == 1 && !returned_.count(x);
      if (cast.op == OpId::ConvertElementType && only_here && type_of(cast.inputs[0].name).dtype == DType::f32 &&
          type_of(cast.inputs[0].name).dist == DistType::fully_sharded) {
        g.source = cast.inputs[0].name;
        dropped_.insert(d->second);
      }
    }
    waits_[g.wait] = i;
    gathers_[i] = g;
  }

  // wait -> dequantize, named as the old wait's result. A 1-D (packed)
  // buffer's gathered rows sit end to end: seen as [N, bytes] to be read,
  // and flattened back.
  void emit_wait(TraceBuilder& b, const BoundSymbol& old_wait, const std::string& future, DType dtype) const {
    const Proxy& y = old_wait.outputs[0];
    Proxy w = b.emit1(OpId::Wait, {Operand::of(future)});
    Attrs a = block().set("dtype", std::string(dtype_name(dtype)));
    if (y.type.shape.size() > 1) {
      b.emit_named(OpId::Dequantize, {Operand::of(w.name)}, std::move(a), {y.name});
      return;
    }
    const int64_t ranks = in_.bsyms[waits_.at(index_of(old_wait))].attrs.get_int("size");
    const int64_t per_rank = numel(y.type.shape) / ranks;
    Proxy rows = b.emit1(OpId::Reshape, {Operand::of(w.name)},
                         Attrs{{"shape", IntList{ranks, quantized_row_bytes(per_rank, kQuantBlock)}}});
    Proxy values = b.emit1(OpId::Dequantize, {Operand::of(rows.name)}, std::move(a));
    b.emit_named(OpId::Reshape, {Operand::of(values.name)}, Attrs{{"shape", IntList(y.type.shape)}}, {y.name});
  }

  size_t index_of(const BoundSymbol& s) const { return static_cast<size_t>(&s - in_.bsyms.data()); }

  const TensorType& type_of(const std::string& name) const {
    if (auto d = def_.find(name); d != def_.end())
      for (const Proxy& o : in_.bsyms[d->second].outputs)
        if (o.name == name) return o.type;
    for (const Proxy& a : in_.args)
      if (a.name == name) return a.type;
    FSDPC_CHECK(false) << "quantize_gathers: no value " << name;
    return in_.args.at(0).type;
  }

  const Trace& in_;
  std::unordered_map<std::string, size_t> def_;
  std::unordered_map<std::string, std::vector<size_t>> users_;
  std::unordered_set<std::string> returned_;
  std::unordered_map<size_t, Gather> gathers_;  // all_gather statement -> its plan
  std::unordered_map<size_t, size_t> waits_;    // wait statement -> its all_gather
  std::unordered_set<size_t> dropped_;          // casts whose source is quantized instead
};

}  // namespace

Trace quantize_gathers(const Trace& t) { return QuantizeGathers(t).run(); }

}  // namespace fsdpc
