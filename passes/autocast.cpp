// autocast (autocast.h).
#include "passes/autocast.h"

#include <unordered_map>

#include "ir/builder.h"
#include "ir/error.h"

namespace fsdpc {

namespace {

enum class Precision { low, f32, keep };

// torch.autocast's split: matmuls in the low precision, ops that accumulate
// or exponentiate in f32; data movement as its input.
Precision policy(OpId op) {
  // the matmul composites; the fused head's loss is f32 by its meta rule
  // (its gradient comes after grad, which runs after autocast)
  if (op == OpId::Linear || op == OpId::ScaledDotProductAttention || op == OpId::LinearCrossEntropy ||
      op == OpId::LinearCrossEntropyStats)
    return Precision::low;
  switch (op) {
    FSDPC_MATMUL_CASES
      return Precision::low;
    FSDPC_ELEMENTWISE_CASES  // a cast moves data; every other elementwise op computes in f32
      return op == OpId::ConvertElementType ? Precision::keep : Precision::f32;
    FSDPC_SHAPE_CASES
    FSDPC_BUFFER_CASES
    FSDPC_MEMORY_CASES
    FSDPC_COLLECTIVE_CASES  // they move what they are given
    case OpId::Take:
      return Precision::keep;
    FSDPC_REDUCTION_CASES
    FSDPC_CREATION_CASES
    FSDPC_FUSION_CASES
    FSDPC_COMPOSITE_CASES  // but linear and attention, above: normalisations, activations, losses
    case OpId::IndexAdd:
      return Precision::f32;
  }
  op_outside_table(op);
}

class Autocast {
 public:
  Autocast(Trace& out, DType low, DType reduce) : b_(out), low_(low), reduce_(reduce) {}

  // The name holding `name`'s value (renamed by re-emission).
  std::string now(const std::string& name) const {
    auto it = renamed_.find(name);
    return it == renamed_.end() ? name : it->second;
  }

  // `name` (a current name) as `dtype`, cast once and remembered.
  std::string as(const std::string& name, DType dtype) {
    const TensorType& t = b_.type_of(name);
    if (t.dtype == dtype || !is_float(t.dtype)) return name;
    const std::string key = name + "/" + std::string(dtype_name(dtype));
    auto it = casts_.find(key);
    if (it != casts_.end()) return it->second;
    const std::string cast =
        b_.emit1(OpId::ConvertElementType, {Operand::of(name)}, Attrs{{"dtype", std::string(dtype_name(dtype))}}).name;
    return casts_[key] = cast;
  }

  void run(const BoundSymbol& s, const std::unordered_map<std::string, bool>& is_param) {
    if (s.op == OpId::Del) {
      BoundSymbol d = s;
      for (Operand& o : d.inputs) o.name = now(o.name);
      b_.append(std::move(d));
      return;
    }
    std::vector<Operand> ins = s.inputs;
    for (Operand& o : ins)
      if (!o.is_scalar()) o.name = now(o.name);
    Attrs attrs = s.attrs;
    const bool param_sync = s.op == OpId::Synchronize && is_param.count(s.inputs.at(0).name);
    if (param_sync) attrs.set("reduce_dtype", std::string(dtype_name(reduce_)));
    if (param_sync && b_.type_of(ins[0].name).dist == DistType::fully_sharded) {
      // FSDP's param_dtype: gather (and reduce the gradient) in `low`. A
      // replicated parameter (no_shard) is cast at its uses instead, and its
      // gradient all_reduced in f32, as DDP's mixed precision does.
      ins[0].name = as(ins[0].name, low_);
    } else {
      switch (policy(s.op)) {
        case Precision::low:
          for (Operand& o : ins)
            if (!o.is_scalar()) o.name = as(o.name, low_);
          break;
        case Precision::f32:
          for (Operand& o : ins)
            if (!o.is_scalar()) o.name = as(o.name, DType::f32);
          break;
        case Precision::keep:
          if (s.op != OpId::ConvertElementType && mixed_floats(ins))
            for (Operand& o : ins)
              if (!o.is_scalar()) o.name = as(o.name, DType::f32);
          break;
      }
    }
    std::vector<Proxy> outs = b_.emit(s.op, std::move(ins), std::move(attrs));
    FSDPC_CHECK(outs.size() == s.outputs.size()) << op_name(s.op) << ": output count changed";
    for (size_t i = 0; i < outs.size(); ++i) renamed_[s.outputs[i].name] = outs[i].name;
  }

 private:
  // Whether float operands come in more than one dtype (cat of a bf16 and an
  // f32 part): such ops then run in f32.
  bool mixed_floats(const std::vector<Operand>& ins) const {
    std::optional<DType> seen;
    for (const Operand& o : ins) {
      if (o.is_scalar()) continue;
      const DType d = b_.type_of(o.name).dtype;
      if (!is_float(d)) continue;
      if (seen && *seen != d) return true;
      seen = d;
    }
    return false;
  }

  TraceBuilder b_;
  DType low_, reduce_;
  std::unordered_map<std::string, std::string> renamed_;  // old output -> new name
  std::unordered_map<std::string, std::string> casts_;    // "name/dtype" -> cast
};

}  // namespace

Trace autocast(const Trace& trace, DType low, DType reduce) {
  if (!is_float(low) || low == DType::f32 || low == DType::f64)
    fail("autocast: the low precision must be bf16 or f16, got ", dtype_name(low));
  if (reduce != DType::f32 && reduce != low)
    fail("autocast: gradients are reduced in f32 or in the low precision (", dtype_name(low), "), not ",
         dtype_name(reduce));
  Trace out;
  out.name = trace.name;
  out.provenance = "autocast";
  out.args = trace.args;
  out.next_id = trace.next_id;
  std::unordered_map<std::string, bool> is_param;
  for (const Proxy& a : trace.args)
    if (a.is_param() && is_float(a.type.dtype)) is_param[a.name] = true;

  Autocast cast(out, low, reduce);
  for (const BoundSymbol& s : trace.bsyms) cast.run(s, is_param);

  // Float results in f32: the loss, and outputs a caller reads.
  std::unordered_map<std::string, std::string> returns;
  std::vector<std::string> names;
  trace.returns.collect_names(names);
  for (const std::string& n : names) returns[n] = cast.as(cast.now(n), DType::f32);
  out.returns = trace.returns;
  rename_returns(out.returns, returns);
  return out;
}

}  // namespace fsdpc
