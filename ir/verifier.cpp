// The verifier (ir/verifier.h): one walk over the statements, sub-symbols
// included, that keeps the names in scope, the futures in flight and the
// names freed by `del`, and re-runs every meta function on the input types.
#include "ir/verifier.h"

#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ir/meta.h"

namespace fsdpc {

namespace {

std::vector<TensorType> output_types(const BoundSymbol& b) {
  std::vector<TensorType> types;
  for (const Proxy& p : b.outputs) types.push_back(p.type);
  return types;
}

// "cpu f32[4] fully_sharded": type_str plus the distribution, which a shape
// lie may be about.
std::string full_type(const TensorType& t) {
  std::string s = type_str(t);
  if (t.dist != DistType::none) (s += ' ') += dist_name(t.dist);
  return s;
}

// Meta errors start with the op name, which the statement label already says.
std::string strip_op(const std::string& msg, std::string_view op) {
  const std::string prefix = std::string(op) + ": ";
  return msg.rfind(prefix, 0) == 0 ? msg.substr(prefix.size()) : msg;
}

// A value visible in one block: its type and the statement that defined it.
struct Def {
  TensorType type;
  std::string where;
};

// One block of statements: the trace's, or one composite's decomposition.
struct Scope {
  std::unordered_map<std::string, Def> visible;
  // The composite's outputs, which its decomposition defines again; null at
  // top level.
  const std::unordered_set<std::string>* redefinable = nullptr;
  std::string composite;  // label of the composite, empty at top level
  // Names a `del` in this block freed -> "statement N" of that del.
  std::unordered_map<std::string, std::string> deleted;
};

struct FutureState {
  std::string defined_by;
  std::string waited_by;  // empty until waited
};

class Verifier {
 public:
  void run(const Trace& trace);

 private:
  void verify_block(const std::vector<BoundSymbol>& bsyms, Scope& scope);
  void verify_bsym(const BoundSymbol& b, const std::string& label, Scope& scope);
  std::vector<OperandType> input_types(const BoundSymbol& b, const std::string& label,
                                       const Scope& scope);
  void check_outputs(const BoundSymbol& b, const std::string& label,
                     const std::vector<TensorType>& inferred);
  void verify_decomposition(const BoundSymbol& b, const std::string& label, const Scope& outer);
  void define(const Proxy& p, const std::string& label, Scope& scope);
  void check_del(const BoundSymbol& b, const std::string& label, const Scope& scope) const;
  void forget_deleted(const BoundSymbol& b, const std::string& label, Scope& scope);
  void check_returns(const Trace& trace, const Scope& top);

  // Every name defined so far at any depth, and where; a composite's outputs
  // are entered once, by the composite itself.
  std::unordered_map<std::string, std::string> defined_;
  std::vector<std::string> future_order_;
  std::unordered_map<std::string, FutureState> futures_;
  std::unordered_set<std::string> returned_;
};

void Verifier::run(const Trace& trace) {
  Scope top;
  std::vector<std::string> returned;
  trace.returns.collect_names(returned);
  returned_.insert(returned.begin(), returned.end());
  for (size_t i = 0; i < trace.args.size(); ++i)
    define(trace.args[i], "argument " + std::to_string(i + 1), top);
  verify_block(trace.bsyms, top);
  check_returns(trace, top);
  for (const std::string& name : future_order_) {
    const FutureState& f = futures_.at(name);
    // A returned future is handed, in flight, to a later trace that waits
    // on it (passes/outer_step.h's issue and land traces).
    if (f.waited_by.empty() && !returned_.count(name))
      fail(name, " (defined by ", f.defined_by, ") is a future that is never waited");
  }
}

void Verifier::verify_block(const std::vector<BoundSymbol>& bsyms, Scope& scope) {
  for (size_t i = 0; i < bsyms.size(); ++i) {
    const std::string n = std::to_string(i + 1);
    const std::string op(op_name(bsyms[i].op));
    const std::string label = scope.composite.empty()
                                  ? "statement " + n + " (" + op + ")"
                                  : scope.composite + " > sub-statement " + n + " (" + op + ")";
    verify_bsym(bsyms[i], label, scope);
  }
}

void Verifier::verify_bsym(const BoundSymbol& b, const std::string& label, Scope& scope) {
  if (b.op == OpId::Del) check_del(b, label, scope);
  const std::vector<OperandType> in_types = input_types(b, label, scope);
  std::vector<TensorType> inferred;
  try {
    // A fusion region's outputs are checked against its statements, which
    // define them (verify_decomposition).
    inferred = b.op == OpId::Fusion ? output_types(b) : infer_types(b.op, in_types, b.attrs);
  } catch (const Error& e) {
    fail(label, ": ", strip_op(e.what(), op_name(b.op)));
  }
  check_outputs(b, label, inferred);
  if (b.op == OpId::Wait) {
    const std::string& name = b.inputs[0].name;
    FutureState& f = futures_[name];
    if (!f.waited_by.empty())
      fail(label, ": ", name, " is waited twice (first by ", f.waited_by, ")");
    f.waited_by = label;
  }
  if (!b.subsymbols.empty()) verify_decomposition(b, label, scope);
  for (const Proxy& out : b.outputs) define(out, label, scope);
  if (b.op == OpId::Del) forget_deleted(b, label, scope);
}

std::vector<OperandType> Verifier::input_types(const BoundSymbol& b, const std::string& label,
                                               const Scope& scope) {
  std::vector<OperandType> types;
  for (size_t i = 0; i < b.inputs.size(); ++i) {
    const Operand& in = b.inputs[i];
    if (in.is_scalar()) {
      types.push_back(OperandType::scalar());
      continue;
    }
    auto it = scope.visible.find(in.name);
    if (it == scope.visible.end()) {
      auto del = scope.deleted.find(in.name);
      if (del != scope.deleted.end())
        fail(label, ": uses ", in.name, ", which was deleted by ", del->second);
      if (!scope.composite.empty() && defined_.count(in.name))
        fail(label, ": uses ", in.name, ", which is neither an input of ", scope.composite,
             " nor defined earlier in its decomposition");
      fail(label, ": uses ", in.name, ", which is not defined before this statement");
    }
    const TensorType& t = it->second.type;
    if (t.future && b.op != OpId::Wait)
      fail(label, ": input ", i, " (", in.name, ") is a future; only wait may consume it");
    // Only ops with the takes_sharded trait (ir/ops.def) take a shard as it
    // is; every other op needs the gathered value (docs/ir.md "Rules shared
    // by all ops").
    if (t.dist == DistType::fully_sharded && !op_info(b.op).has(OpTrait::takes_sharded))
      fail(label, ": ", op_name(b.op), " uses ", in.name,
           ", which is fully_sharded; synchronize or all_gather it first");
    types.push_back(OperandType::of(t));
  }
  return types;
}

void Verifier::check_outputs(const BoundSymbol& b, const std::string& label,
                             const std::vector<TensorType>& inferred) {
  if (inferred.size() != b.outputs.size())
    fail(label, ": records ", b.outputs.size(), " output(s), but ", op_name(b.op), " infers ",
         inferred.size());
  for (size_t i = 0; i < inferred.size(); ++i) {
    const Proxy& out = b.outputs[i];
    if (out.name.empty()) fail(label, ": output ", i, " has no name");
    if (out.type != inferred[i])
      fail(label, ": shape lie: ", out.name, " is recorded as ", full_type(out.type), ", but ",
           op_name(b.op), " infers ", full_type(inferred[i]));
  }
}

// The decomposition sees only the composite's inputs and its own earlier
// values, and must end up defining each of the composite's outputs.
void Verifier::verify_decomposition(const BoundSymbol& b, const std::string& label,
                                    const Scope& outer) {
  std::unordered_set<std::string> outputs;
  for (const Proxy& out : b.outputs) outputs.insert(out.name);
  Scope sub;
  sub.redefinable = &outputs;
  sub.composite = label;
  for (const Operand& in : b.inputs)
    if (!in.is_scalar()) sub.visible[in.name] = outer.visible.at(in.name);
  verify_block(b.subsymbols, sub);
  for (const Proxy& out : b.outputs) {
    // Visible is not enough: an output named like an input is visible from
    // the start, so the definition must come from inside the decomposition.
    auto it = sub.visible.find(out.name);
    if (it == sub.visible.end() || it->second.where.rfind(label + " > ", 0) != 0)
      fail(label, ": the decomposition does not define output ", out.name);
    if (it->second.type != out.type)
      fail(label, ": the decomposition defines ", out.name, " as ", full_type(it->second.type),
           ", but ", op_name(b.op), " outputs ", full_type(out.type));
  }
}

void Verifier::define(const Proxy& p, const std::string& label, Scope& scope) {
  auto local = scope.visible.find(p.name);
  if (local != scope.visible.end())
    fail(label, ": ", p.name, " is defined twice (first by ", local->second.where, ")");
  const bool redefines = scope.redefinable && scope.redefinable->count(p.name);
  auto global = defined_.find(p.name);
  if (global != defined_.end() && !redefines)
    fail(label, ": ", p.name, " is defined twice (first by ", global->second, ")");
  scope.visible[p.name] = Def{p.type, label};
  if (redefines) return;  // the composite itself enters it
  defined_[p.name] = label;
  if (p.type.future && !futures_.count(p.name)) {
    future_order_.push_back(p.name);
    futures_[p.name] = FutureState{label, ""};
  }
}

// What a `del` may name, checked before its inputs are typed so the message
// speaks of deleting. Arguments may be deleted: the runtime decides whether
// it owns their buffers. Returned values may not: the caller receives them.
void Verifier::check_del(const BoundSymbol& b, const std::string& label,
                         const Scope& scope) const {
  if (!b.attrs.empty()) fail(label, ": del takes no attributes");
  std::unordered_set<std::string> seen;
  for (const Operand& in : b.inputs) {
    if (in.is_scalar()) continue;  // the meta check names it
    if (!seen.insert(in.name).second) fail(label, ": deletes ", in.name, " twice");
    auto del = scope.deleted.find(in.name);
    if (del != scope.deleted.end())
      fail(label, ": deletes ", in.name, ", which was already deleted by ", del->second);
    if (!scope.visible.count(in.name))
      fail(label, ": deletes ", in.name, ", which is not defined before this statement");
    if (scope.composite.empty() && returned_.count(in.name))
      fail(label, ": deletes ", in.name, ", which the trace returns");
  }
}

// After a del, its names are out of scope; later uses name the del.
void Verifier::forget_deleted(const BoundSymbol& b, const std::string& label, Scope& scope) {
  // "statement 5 (del)" -> "statement 5"
  const std::string where = label.substr(0, label.size() - std::string(" (del)").size());
  for (const Operand& in : b.inputs) {
    scope.visible.erase(in.name);
    scope.deleted[in.name] = where;
  }
}

void Verifier::check_returns(const Trace& trace, const Scope& top) {
  std::vector<std::string> names;
  trace.returns.collect_names(names);
  for (const std::string& name : names)
    if (!top.visible.count(name)) fail("return: ", name, " is not defined");
}

}  // namespace

void verify(const Trace& trace) { Verifier().run(trace); }

}  // namespace fsdpc
