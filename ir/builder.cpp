// TraceBuilder: the one place bound symbols are created, so that naming,
// shape checking and decomposition recording cannot be skipped.
#include "ir/builder.h"

#include "ir/decompositions.h"
#include "ir/error.h"
#include "ir/meta.h"

namespace fsdpc {

namespace {
// Renames the definition of `from` (and, for a composite, the definition
// inside its own decomposition) to `to`.
bool rename_definition(BoundSymbol& b, const std::string& from, const std::string& to) {
  bool found = false;
  for (Proxy& out : b.outputs) {
    if (out.name == from) {
      out.name = to;
      found = true;
    }
  }
  if (found)
    for (BoundSymbol& sub : b.subsymbols.mut()) rename_definition(sub, from, to);
  return found;
}
}  // namespace

TraceBuilder::TraceBuilder(Trace& trace) : TraceBuilder(trace, Options{}) {}

TraceBuilder::TraceBuilder(Trace& trace, Options options)
    : trace_(trace), options_(options), sink_(&trace.bsyms) {
  for (const Proxy& a : trace_.args) types_[a.name] = a.type;
  for_each_bsym(trace_.bsyms, [&](const BoundSymbol& b) {
    for (const Proxy& o : b.outputs) types_[o.name] = o.type;
  });
}

const Proxy& TraceBuilder::add_arg(Proxy p) {
  if (types_.count(p.name)) fail("argument '", p.name, "' is defined twice");
  types_[p.name] = p.type;
  trace_.args.push_back(std::move(p));
  return trace_.args.back();
}

const TensorType& TraceBuilder::type_of(const std::string& name) const {
  auto it = types_.find(name);
  if (it == types_.end()) fail("unknown value '", name, "'");
  return it->second;
}

std::vector<Proxy> TraceBuilder::emit(OpId op, std::vector<Operand> inputs, Attrs attrs) {
  std::vector<OperandType> in_types;
  in_types.reserve(inputs.size());
  for (const Operand& in : inputs)
    in_types.push_back(in.is_scalar() ? OperandType::scalar() : OperandType::of(type_of(in.name)));
  std::vector<TensorType> out_types = infer_types(op, in_types, attrs);

  BoundSymbol b;
  b.op = op;
  b.inputs = std::move(inputs);
  b.attrs = std::move(attrs);
  for (TensorType& t : out_types) {
    Proxy p;
    p.name = trace_.fresh_name(t.future);
    p.type = std::move(t);
    types_[p.name] = p.type;
    b.outputs.push_back(std::move(p));
  }

  if (op_info(op).composite && options_.record_decompositions) {
    std::vector<BoundSymbol>* saved = sink_;
    sink_ = &b.subsymbols.mut();
    const std::vector<Proxy> results = decompose(*this, b);
    sink_ = saved;
    FSDPC_CHECK(!b.subsymbols.empty() && results.size() == b.outputs.size())
        << "decomposition of " << op_name(op) << " gives " << results.size() << " results for "
        << b.outputs.size() << " outputs";
    for (size_t i = 0; i < results.size(); ++i) {
      const Proxy& result = results[i];
      FSDPC_CHECK(result.type == b.outputs[i].type)
          << "decomposition of " << op_name(op) << " gives " << type_str(result.type) << " for output " << i
          << ", meta says " << type_str(b.outputs[i].type);
      bool renamed = false;
      for (auto it = b.subsymbols.rbegin(); it != b.subsymbols.rend() && !renamed; ++it)
        renamed = rename_definition(*it, result.name, b.outputs[i].name);
      FSDPC_CHECK(renamed) << "decomposition of " << op_name(op) << " returned a value it did not define";
      types_.erase(result.name);
    }
  }

  sink_->push_back(std::move(b));
  return sink_->back().outputs;
}

void TraceBuilder::append(BoundSymbol b) {
  for (const Proxy& o : b.outputs) types_[o.name] = o.type;
  sink_->push_back(std::move(b));
}

std::vector<Proxy> TraceBuilder::emit_named(OpId op, std::vector<Operand> inputs, Attrs attrs,
                                            const std::vector<std::string>& names) {
  emit(op, std::move(inputs), std::move(attrs));
  BoundSymbol s = std::move(sink_->back());
  sink_->pop_back();
  size_t renamed = 0;
  for (size_t i = 0; i < names.size() && i < s.outputs.size(); ++i) {
    if (names[i].empty()) continue;
    types_.erase(s.outputs[i].name);
    rename_definition(s, std::string(s.outputs[i].name), names[i]);  // a composite's decomposition too
    ++renamed;
  }
  // Hand back the fresh names nobody kept, so the numbering has no gaps (a
  // prim's: a composite's decomposition took names after them).
  if (renamed == s.outputs.size() && s.subsymbols.empty()) trace_.next_id -= static_cast<int64_t>(renamed);
  append(std::move(s));
  return sink_->back().outputs;
}

Proxy TraceBuilder::emit1(OpId op, std::vector<Operand> inputs, Attrs attrs) {
  std::vector<Proxy> outs = emit(op, std::move(inputs), std::move(attrs));
  FSDPC_CHECK(outs.size() == 1) << op_name(op) << " has " << outs.size() << " outputs";
  return outs[0];
}

}  // namespace fsdpc
