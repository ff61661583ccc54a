// grad: reverse-mode autodiff of a trace into one joint forward+backward
// trace, as Thunder's grad transform does. The forward is copied with its
// names; synchronize is lowered on the way (gathered in the forward, divided
// and reduced in the backward, once per parameter however often it is used,
// in its reduce_dtype when mixed precision set one).
//
// Pre:  the first return is a float tensor (normally the scalar loss); every
//       op has a VJP rule (passes/vjp_rules.h).
// Post: args = the input's, then acc_* (accumulate_grads), then `cotangent`;
//       the forward (synchronize lowered, del dropped), then the backward;
//       returns (original items..., (grad of each requires_grad parameter,
//       then of each options.input_grads argument)).
//
//   t0 = synchronize(t_w, group=dp, size=2, shape=[64, 64])
//   t1 = linear(x, t0) ... t4 = sum(t3, dims=[0, 1]);  return t4
// becomes
//   ft7 = all_gather(t_w, group=dp, size=2, dim=0);  t0 = wait(ft7)
//   t1 = linear(x, t0) ... t4 = sum(t3, dims=[0, 1])
//   ... t20 = div(t19, 2.0);  ft21 = reduce_scatter(t20, group=dp, size=2, dim=0, op=sum)
//   t22 = wait(ft21);  return t4, (t22,)
#include "passes/grad.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/builder.h"
#include "ir/error.h"
#include "passes/vjp_rules.h"

namespace fsdpc {

namespace {

using NameMap = std::unordered_map<std::string, std::string>;

// One forward statement as the backward sees it. A lowered synchronize keeps
// its statement; its output is named by the value that now stands for it.
struct Step {
  BoundSymbol bsym;
  bool lowered_sync = false;
};

struct Forward {
  std::vector<Step> steps;
  NameMap renamed;  // replicated synchronize output -> its input
};

const std::string& renamed(const NameMap& m, const std::string& name) {
  auto it = m.find(name);
  return it == m.end() ? name : it->second;
}




const TensorType& type_in(const Trace& trace, const std::string& name) {
  for (const Proxy& a : trace.args)
    if (a.name == name) return a.type;
  for (const BoundSymbol& b : trace.bsyms)
    for (const Proxy& o : b.outputs)
      if (o.name == name) return o.type;
  fail("grad: the returned value '", name, "' is not defined in the trace");
}

// The first return: what the backward starts from.
Proxy loss_of(const Trace& trace) {
  const ReturnTree& r = trace.returns;
  const ReturnTree* first = r.is_tuple ? (r.items.empty() ? nullptr : &r.items[0]) : &r;
  if (!first || first->is_tuple)
    fail("grad: the trace's first return must be a tensor (the loss); it returns nothing or a "
         "nested tuple first");
  Proxy loss;
  loss.name = first->name;
  loss.type = type_in(trace, loss.name);
  if (!is_float(loss.type.dtype) || loss.type.future)
    fail("grad: the first return ", loss.name, " is ", type_str(loss.type),
         "; expected a float tensor (the loss)");
  return loss;
}

// Mixed precision synchronizes a cast of a parameter (passes/autocast.h):
// cast -> parameter, for each such cast of a parameter with a gradient. The
// synchronize's gradient then belongs to the parameter, accumulated in the
// parameter's dtype.
NameMap parameter_casts(const Trace& trace) {
  std::unordered_set<std::string> params;
  for (const Proxy& a : trace.args)
    if (a.is_param() && a.requires_grad) params.insert(a.name);
  NameMap casts;
  for (const BoundSymbol& b : trace.bsyms)
    if (b.op == OpId::ConvertElementType && params.count(b.inputs.at(0).name))
      casts[b.output().name] = b.inputs[0].name;
  return casts;
}

// acc_<param> arguments: one per synchronized parameter that has a gradient,
// shaped like the gathered (full) parameter, in the parameter's dtype.
// Returns param -> acc name.
NameMap add_acc_args(Trace& joint, const Trace& trace, const NameMap& casts) {
  std::unordered_map<std::string, const Proxy*> params;
  for (const Proxy& a : trace.args)
    if (a.is_param() && a.requires_grad) params[a.name] = &a;
  NameMap acc;
  for (const BoundSymbol& b : trace.bsyms) {
    if (b.op != OpId::Synchronize) continue;
    const std::string& x = renamed(casts, b.inputs.at(0).name);
    if (!params.count(x) || acc.count(x)) continue;
    Proxy p;
    p.name = "acc_" + x;
    p.type = b.output().type;
    p.type.dist = DistType::none;
    p.type.dtype = params.at(x)->type.dtype;
    acc[x] = p.name;
    joint.args.push_back(std::move(p));
  }
  return acc;
}

// Copies the forward into `joint`. A lowered synchronize's last statement
// takes the synchronize's output name, so later statements read as before;
// a replicated one is the identity and its uses read the input instead.
Forward copy_forward(Trace& joint, const Trace& trace) {
  TraceBuilder b(joint);
  Forward f;
  for (const BoundSymbol& src : trace.bsyms) {
    if (src.op == OpId::Del) continue;  // the backward still needs what it frees
    BoundSymbol s = src;
    rename_uses(s, f.renamed);
    if (s.op != OpId::Synchronize) {
      b.append(s);
      f.steps.push_back({std::move(s), false});
      continue;
    }
    const std::string out = s.output().name;
    const Proxy v = lower_synchronize(b, s);
    if (v.name == s.inputs[0].name) {
      f.renamed[out] = v.name;
      s.outputs[0].name = v.name;
    } else {
      FSDPC_CHECK(joint.bsyms.back().output().name == v.name) << "lowering of " << out;
      // Renamed through the builder, which a later synchronize of this value
      // (tensor parallelism's f of a gathered parameter) asks for its type.
      BoundSymbol last = std::move(joint.bsyms.back());
      joint.bsyms.pop_back();
      last.outputs[0].name = out;
      b.append(std::move(last));
    }
    f.steps.push_back({std::move(s), true});
  }
  return f;
}

// The reverse walk: cotangents by value name, accumulated with add.
class Backward {
 public:
  Backward(Trace& joint, const GradOptions& options, const NameMap& acc, const NameMap& casts)
      : b_(joint), options_(options), acc_(acc), casts_(casts) {}

  void run(const std::vector<Proxy>& args, const std::vector<Step>& steps, const Proxy& loss,
           const Proxy& cotangent);
  // One gradient per parameter with requires_grad, in argument order.
  ReturnTree gradients(const std::vector<Proxy>& args);

 private:
  void mark_requires(const std::vector<Proxy>& args, const std::vector<Step>& steps);
  void step(const Step& s);
  void sync_step(const BoundSymbol& sync, Proxy g);
  void accumulate(const std::string& name, const Proxy& ct);
  std::optional<Proxy> take(const std::string& name);
  Proxy as(const Proxy& x, DType d);

  TraceBuilder b_;
  const GradOptions& options_;
  const NameMap& acc_;
  const NameMap& casts_;  // parameter_casts()
  std::unordered_set<std::string> requires_;           // values that depend on a parameter
  std::unordered_map<std::string, Proxy> cotangents_;  // value -> summed cotangent
  std::unordered_map<std::string, Proxy> local_;       // no_sync: param -> unsynchronized grad
};

void Backward::run(const std::vector<Proxy>& args, const std::vector<Step>& steps,
                   const Proxy& loss, const Proxy& cotangent) {
  mark_requires(args, steps);
  if (requires_.count(loss.name)) cotangents_[loss.name] = cotangent;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) step(*it);
}

// A float output of a statement with a differentiable input differentiates.
void Backward::mark_requires(const std::vector<Proxy>& args, const std::vector<Step>& steps) {
  for (const Proxy& a : args)
    if (a.is_param() && a.requires_grad) requires_.insert(a.name);
  for (const std::string& x : options_.input_grads) requires_.insert(x);
  for (const Step& s : steps) {
    bool any = false;
    for (const Operand& in : s.bsym.inputs) any = any || (!in.is_scalar() && requires_.count(in.name));
    if (!any) continue;
    for (const Proxy& o : s.bsym.outputs)
      if (is_float(o.type.dtype)) requires_.insert(o.name);
  }
}

void Backward::step(const Step& s) {
  Cotangents outs;
  bool any = false;
  for (const Proxy& o : s.bsym.outputs) {
    outs.push_back(take(o.name));
    any = any || outs.back().has_value();
  }
  if (!any) return;
  if (s.lowered_sync) return sync_step(s.bsym, *outs[0]);
  std::vector<bool> needs;
  for (const Operand& in : s.bsym.inputs) needs.push_back(!in.is_scalar() && requires_.count(in.name));
  const Cotangents ins = vjp(b_, s.bsym, outs, needs);
  FSDPC_CHECK(ins.size() == s.bsym.inputs.size()) << op_name(s.bsym.op) << " VJP arity";
  for (size_t i = 0; i < ins.size(); ++i)
    if (needs[i] && ins[i]) accumulate(s.bsym.inputs[i].name, *ins[i]);
}

// `g` is the sum over every use of the gathered value: one reduction per
// synchronize, however often (tied weights) it is used. The gradient of a
// synchronized cast of a parameter (mixed precision) goes to the parameter
// itself: accumulated (no_sync, acc_*) in the parameter's dtype, reduced in
// the synchronize's reduce_dtype.
void Backward::sync_step(const BoundSymbol& sync, Proxy g) {
  const std::string& x = sync.inputs[0].name;
  // Tensor parallelism's f reduces an activation's cotangent: never skipped
  // by no_sync, never accumulated.
  if (sync.attrs.has("grad") && sync.attrs.get_str("grad") == "sum")
    return accumulate(x, reduce_synchronized_grad(b_, sync, g));
  const std::string& owner = renamed(casts_, x);
  const DType keep = b_.type_of(owner).dtype;
  g = as(g, keep);
  if (auto it = acc_.find(owner); it != acc_.end())
    g = b_.emit1(OpId::Add, {Operand::of(g.name), Operand::of(it->second)});
  if (options_.sync_grads) {
    const DType reduce =
        sync.attrs.has("reduce_dtype") ? *parse_dtype(sync.attrs.get_str("reduce_dtype")) : keep;  // meta checked it
    return accumulate(owner, as(reduce_synchronized_grad(b_, sync, as(g, reduce)), keep));
  }
  auto [it, fresh] = local_.emplace(owner, g);
  if (!fresh) it->second = b_.emit1(OpId::Add, {Operand::of(it->second.name), Operand::of(g.name)});
}

Proxy Backward::as(const Proxy& x, DType d) {
  if (x.type.dtype == d) return x;
  return b_.emit1(OpId::ConvertElementType, {Operand::of(x.name)}, Attrs{{"dtype", std::string(dtype_name(d))}});
}

void Backward::accumulate(const std::string& name, const Proxy& ct) {
  const TensorType& t = b_.type_of(name);
  FSDPC_CHECK(ct.type.shape == t.shape && ct.type.dtype == t.dtype && !ct.type.future)
      << "VJP rule gave " << type_str(ct.type) << " as the cotangent of " << name << " ("
      << type_str(t) << ")";
  auto [it, fresh] = cotangents_.emplace(name, ct);
  if (!fresh)
    it->second = b_.emit1(OpId::Add, {Operand::of(it->second.name), Operand::of(ct.name)});
}

std::optional<Proxy> Backward::take(const std::string& name) {
  auto it = cotangents_.find(name);
  if (it == cotangents_.end()) return std::nullopt;
  Proxy p = std::move(it->second);
  cotangents_.erase(it);
  return p;
}

ReturnTree Backward::gradients(const std::vector<Proxy>& args) {
  std::vector<ReturnTree> grads;
  // Unused: PyTorch would give None; a zero keeps optimizers uniform.
  auto or_zero = [&](std::optional<Proxy> g, const Proxy& a) {
    if (!g)
      g = b_.emit1(OpId::Full, {},
                   Attrs{{"shape", IntList(a.type.shape)}, {"value", 0.0},
                         {"dtype", std::string(dtype_name(a.type.dtype))},
                         {"device", device_name(a.type.device)}});
    grads.push_back(ReturnTree::leaf(g->name));
  };
  for (const Proxy& a : args) {
    if (!a.is_param() || !a.requires_grad) continue;
    std::optional<Proxy> g = take(a.name);
    if (auto it = local_.find(a.name); it != local_.end())
      g = g ? b_.emit1(OpId::Add, {Operand::of(g->name), Operand::of(it->second.name)})
            : it->second;
    or_zero(std::move(g), a);
  }
  for (const std::string& x : options_.input_grads)
    for (const Proxy& a : args)
      if (a.name == x) or_zero(take(x), a);
  return ReturnTree::tuple(std::move(grads));
}

}  // namespace

Trace grad(const Trace& trace, const GradOptions& options) {
  const Proxy loss = loss_of(trace);
  for (const std::string& x : options.input_grads) {
    auto a = std::find_if(trace.args.begin(), trace.args.end(), [&](const Proxy& p) { return p.name == x; });
    if (a == trace.args.end() || a->is_param() || !is_float(a->type.dtype))
      fail("grad: input_grads names '", x, "', which is not a float non-parameter argument of the trace");
  }
  Trace joint;
  joint.name = trace.name;
  joint.provenance = "grad";
  joint.args = trace.args;
  joint.next_id = trace.next_id;
  const NameMap casts = parameter_casts(trace);
  const NameMap acc = options.accumulate_grads ? add_acc_args(joint, trace, casts) : NameMap{};
  Proxy cotangent;
  cotangent.name = kCotangentArg;
  cotangent.type = loss.type;
  cotangent.type.dist = DistType::none;
  for (const Proxy& a : joint.args)
    if (a.name == cotangent.name) fail("grad: an argument is already named 'cotangent'");
  joint.args.push_back(cotangent);

  const Forward forward = copy_forward(joint, trace);
  ReturnTree original = trace.returns;
  rename_returns(original, forward.renamed);
  std::vector<ReturnTree> returns;
  if (original.is_tuple)
    returns = std::move(original.items);
  else
    returns.push_back(std::move(original));

  Backward backward(joint, options, acc, casts);
  Proxy loss_now = loss;
  loss_now.name = renamed(forward.renamed, loss.name);
  backward.run(trace.args, forward.steps, loss_now, cotangent);
  returns.push_back(backward.gradients(trace.args));
  joint.returns = ReturnTree::tuple(std::move(returns));
  return joint;
}

}  // namespace fsdpc
