// tp: column- and row-parallel linears by a plan over parameter paths; see
// passes/tensor_parallel.h. Each value carries a layout (replicated, or split
// on one dim in blocks; a row-parallel product's partial sum is completed by
// g at once) and every statement a split value reaches is re-emitted with its
// rank-local shapes; the rest is copied unchanged, names kept. The
// vocabulary-parallel ops are in tensor_parallel_vocab.cpp.
#include "passes/tensor_parallel.h"

#include <algorithm>
#include <unordered_map>

#include "ir/error.h"
#include "passes/tensor_parallel_rewriter.h"
#include "passes/vjp_rules_util.h"

namespace fsdpc {

namespace tp_detail {

void TensorParallel::unsupported(const BoundSymbol& s, const std::string& why) const {
  fail("tp ", tp_, ": ", op_name(s.op), " -> ", s.outputs.empty() ? "" : s.outputs[0].name, ": ", why);
}

Local TensorParallel::in(const BoundSymbol& s, size_t i) const {
  const Operand& o = s.inputs[i];
  if (o.is_scalar()) return {"", {}};
  auto it = values_.find(o.name);
  return it == values_.end() ? Local{o.name, {}} : it->second;
}

void TensorParallel::define(const BoundSymbol& s, const Proxy& out, Layout l) {
  values_[s.outputs.at(0).name] = {out.name, l};
  renamed_[s.outputs.at(0).name] = out.name;
}

// Megatron's f, once per replicated value feeding column-parallel layers
// (Llama's q, k and v projections share one).
std::string TensorParallel::f(const std::string& x) {
  auto it = f_.find(x);
  if (it != f_.end()) return it->second;
  Attrs a{{"group", std::string("tp")}, {"size", int64_t{tp_}}, {"grad", std::string("sum")}};
  return f_[x] = b_.emit1(OpId::Synchronize, {Operand::of(x)}, std::move(a)).name;
}

// Megatron's g: the ranks' partial sums added; the cotangent passes through.
Proxy TensorParallel::g(const Proxy& partial) {
  Attrs a{{"group", std::string("tp")}, {"size", int64_t{tp_}}, {"op", std::string("sum")},
          {"grad", std::string("identity")}};
  Proxy fut = b_.emit1(OpId::AllReduce, {Operand::of(partial.name)}, std::move(a));
  return b_.emit1(OpId::Wait, {Operand::of(fut.name)});
}

// Sequence parallelism's exit from a row-parallel block: the partial sums
// reduce-scattered over the sequence (dim 1), so each rank holds the whole
// sum of its S/T positions. Backward: the cotangents all-gathered.
Proxy TensorParallel::reduce_scatter_seq(const BoundSymbol& s, const Proxy& partial) {
  const Shape& shape = partial.type.shape;
  if (shape.size() < 2 || shape[1] % tp_ != 0)
    fail("tp ", tp_, " --sequence-parallel: ", op_name(s.op), " -> ", s.outputs.at(0).name, " is ", shape_str(shape),
         "; its sequence (dim 1) must be divisible by ", tp_);
  Attrs a{{"group", std::string("tp")}, {"size", int64_t{tp_}}, {"dim", int64_t{1}}, {"op", std::string("sum")},
          {"dist", std::string("none")}};
  return emit(OpId::Wait, {Operand::of(emit(OpId::ReduceScatter, {Operand::of(partial.name)}, std::move(a)).name)});
}

// Its entry to a column-parallel block: the sequence all-gathered (once per
// value: Llama's q, k and v share it). Backward: the ranks' partial
// cotangents reduce-scattered, which is f's sum and the split in one.
std::string TensorParallel::all_gather_seq(const std::string& x) {
  auto it = gathered_.find(x);
  if (it != gathered_.end()) return it->second;
  Attrs a{{"group", std::string("tp")}, {"size", int64_t{tp_}}, {"dim", int64_t{1}}};
  return gathered_[x] = emit(OpId::Wait, {Operand::of(emit(OpId::AllGather, {Operand::of(x)}, std::move(a)).name)}).name;
}

// The sequence all-gathered for a replicated computation after the
// sequence-parallel region: every rank computes the whole result, so the
// cotangent is split back, not summed.
std::string TensorParallel::gather_seq_split_back(const std::string& x) {
  Attrs a{{"group", std::string("tp")}, {"size", int64_t{tp_}}, {"dim", int64_t{1}}, {"grad", std::string("split")}};
  return emit(OpId::Wait, {Operand::of(emit(OpId::AllGather, {Operand::of(x)}, std::move(a)).name)}).name;
}

// A replicated value's S/T positions of this rank, for a statement that
// mixes it with sequence-parallel values (a residual, the position
// embedding): looked up by position after f, whose backward sums the
// ranks' cotangents, each nonzero on its own positions only.
Operand TensorParallel::scatter_seq(const BoundSymbol& s, const std::string& replicated) {
  const TensorType& t = b_.type_of(replicated);
  if (t.shape.size() < 2 || t.shape[1] % tp_ != 0)
    fail("tp ", tp_, " --sequence-parallel: ", op_name(s.op), " -> ", s.outputs.at(0).name, " reads ", replicated, " of ",
         shape_str(t.shape), "; its sequence (dim 1) must be divisible by ", tp_);
  const int64_t local = t.shape[1] / tp_;
  const Proxy positions = vjp_detail::indices_from(b_, rank_offset(local, DType::i64, t.device), local);
  return Operand::of(emit(OpId::Take, {Operand::of(f(replicated)), Operand::of(positions.name)}, Attrs{{"dim", int64_t{1}}}).name);
}

// layer_norm / rms_norm of a sequence-parallel value: its own positions,
// the weights through f, since each rank's weight gradient covers only its
// positions.
void TensorParallel::norm(const BoundSymbol& s, const Local& x) {
  std::vector<Operand> ins{Operand::of(x.name)};
  for (size_t i = 1; i < s.inputs.size(); ++i) {
    const Local w = in(s, i);
    if (w.layout.split()) unsupported(s, "a norm's weights must be replicated");
    ins.push_back(Operand::of(f(w.name)));
  }
  define(s, emit(s.op, std::move(ins), s.attrs), kSeq);
}

// Input i as an operand of a statement whose split values have layout `want`.
// A replicated input made by broadcast_in_dim along the split dim is
// broadcast again to the local shape (Llama's rotary cos/sin over heads).
Operand TensorParallel::localized(const BoundSymbol& s, size_t i, Layout want) {
  const Local x = in(s, i);
  if (x.name.empty()) return s.inputs[i];
  if (x.layout.split()) {
    if (!x.layout.same_cut(want)) unsupported(s, "inputs split on different dims");
    return Operand::of(x.name);
  }
  auto bc = broadcasts_.find(s.inputs[i].name);
  if (want.seq) {  // a replicated value in the sequence-parallel region
    if (bc != broadcasts_.end()) {
      const BoundSymbol& src = *bc->second;
      const IntList& dims = src.attrs.get_ints("broadcast_dims");
      bool along_seq = false;
      for (size_t k = 0; k < dims.size(); ++k)
        along_seq = along_seq || (dims[k] == 1 && b_.type_of(in(src, 0).name).shape[k] != 1);
      if (!along_seq) {  // a bias or scale: broadcast again to the local shape, its gradient summed by f
        Shape shape = src.attrs.get_ints("shape");
        shape[1] /= tp_;
        Attrs a = src.attrs;
        a.set("shape", shape);
        return Operand::of(b_.emit1(OpId::BroadcastInDim, {Operand::of(f(in(src, 0).name))}, std::move(a)).name);
      }
    }
    return scatter_seq(s, x.name);
  }
  if (bc == broadcasts_.end()) unsupported(s, "mixes a split value with a replicated " + s.inputs[i].name);
  const BoundSymbol& src = *bc->second;
  IntList dims = src.attrs.get_ints("broadcast_dims");
  Shape shape = src.attrs.get_ints("shape");
  const Local source = in(src, 0);
  for (size_t k = 0; k < dims.size(); ++k)
    if (dims[k] == want.dim && b_.type_of(source.name).shape[k] != 1)
      unsupported(s, "mixes a split value with " + s.inputs[i].name + ", which varies along the split dim");
  shape[want.dim] = want.vocab ? (shape[want.dim] + tp_ - 1) / tp_ : shape[want.dim] / tp_;
  Attrs a = src.attrs;
  a.set("shape", shape);
  return Operand::of(b_.emit1(OpId::BroadcastInDim, {Operand::of(source.name)}, std::move(a)).name);
}

// Column-parallel: replicated x times a weight split on its output features.
// Row-parallel: x split on its features times a weight split on its input
// features, a partial sum that g completes (a bias is added after g).
void TensorParallel::matmul(const BoundSymbol& s) {
  const Local x = in(s, 0), w = in(s, 1);
  const bool linear = s.op == OpId::Linear;
  const int64_t wr = static_cast<int64_t>(b_.type_of(w.name).shape.size());
  const int64_t out_dim = linear ? 0 : wr - 1, in_dim = linear ? wr - 1 : wr - 2;
  const int64_t last = static_cast<int64_t>(s.outputs[0].type.shape.size()) - 1;
  std::vector<Operand> ins{Operand::of(x.name), Operand::of(w.name)};
  if ((!x.layout.split() || x.layout.seq) && w.layout.dim == out_dim) {
    ins[0] = Operand::of(x.layout.seq ? all_gather_seq(x.name) : f(x.name));
    if (s.inputs.size() == 3) {
      const Local bias = in(s, 2);
      if (bias.layout.dim != 0 || bias.layout.blocks != w.layout.blocks)
        unsupported(s, "the bias of a column-parallel linear must be split like its weight");
      ins.push_back(Operand::of(bias.name));
    }
    // A padded vocabulary's logits: its padded columns are h . 0 = 0, kept
    // out of the loss by cross_entropy.
    define(s, b_.emit1(s.op, std::move(ins), s.attrs), Layout{last, w.layout.blocks, false, w.layout.vocab});
    return;
  }
  if (x.layout.vocab || w.layout.vocab) unsupported(s, "a padded vocabulary may only be a column-parallel weight");
  if (!x.layout.seq && x.layout.dim == last && x.layout.blocks == 1 && w.layout.dim == in_dim && w.layout.blocks == 1) {
    const Proxy partial = b_.emit1(s.op, std::move(ins), s.attrs);
    Proxy y = sp_ ? reduce_scatter_seq(s, partial) : g(partial);
    if (s.inputs.size() == 3) {  // the bias once, after the partial sums are added
      const Local bias = in(s, 2);
      if (bias.layout.split()) unsupported(s, "the bias of a row-parallel linear must be replicated");
      Attrs a{{"shape", y.type.shape}, {"broadcast_dims", IntList{last}}};
      // With sequence parallelism a rank adds it to its positions only: f sums its gradient.
      Proxy full = b_.emit1(OpId::BroadcastInDim, {Operand::of(sp_ ? f(bias.name) : bias.name)}, std::move(a));
      y = b_.emit1(OpId::Add, {Operand::of(y.name), Operand::of(full.name)});
    }
    define(s, y, sp_ ? kSeq : Layout{});
    return;
  }
  if (x.layout.seq && !w.layout.split() && (s.inputs.size() < 3 || !in(s, 2).layout.split())) {
    // A replicated weight after the sequence-parallel region (an LM head
    // the plan leaves whole).
    ins[0] = Operand::of(gather_seq_split_back(x.name));
    if (s.inputs.size() == 3) ins.push_back(Operand::of(in(s, 2).name));
    define(s, b_.emit1(s.op, std::move(ins), s.attrs), Layout{});
    return;
  }
  unsupported(s, "only column-parallel (replicated input, weight split on its outputs) and row-parallel "
                 "(input split on its features, weight on its inputs) products are supported");
}

// Dims of `from` and `to` grouped where their products agree; the split dim
// must lead its group (heads before head_dim), and the group's leading output
// dim takes the split.
void TensorParallel::reshape(const BoundSymbol& s, const Local& x) {
  if (x.layout.blocks != 1) unsupported(s, "reshape of a value split in several blocks");
  const Shape& from = b_.type_of(x.name).shape;  // local
  Shape full_from = from;
  full_from[x.layout.dim] *= tp_;
  Shape to = s.attrs.get_ints("shape");
  size_t i = 0, j = 0;
  while (i < full_from.size() && j < to.size()) {
    const size_t gi = i, gj = j;
    int64_t a = full_from[i++], c = to[j++];
    while (a != c) {
      if (a < c && i < full_from.size()) a *= full_from[i++];
      else if (c < a && j < to.size()) c *= to[j++];
      else unsupported(s, "cannot group the reshape's dims");
    }
    if (static_cast<int64_t>(gi) <= x.layout.dim && x.layout.dim < static_cast<int64_t>(i)) {
      if (static_cast<int64_t>(gi) != x.layout.dim)
        unsupported(s, "the split dim does not lead its group of reshaped dims");
      if (to[gj] % tp_ != 0)
        fail("tp ", tp_, ": ", op_name(s.op), " -> ", s.outputs[0].name, " splits ", to[gj],
             " heads (attention heads, or Llama's key/value heads) across ", tp_,
             " tensor-parallel ranks; ", to[gj], " is not divisible by ", tp_);
      to[gj] /= tp_;
      Attrs a = s.attrs;
      a.set("shape", to);
      define(s, b_.emit1(OpId::Reshape, {Operand::of(x.name)}, std::move(a)), Layout{static_cast<int64_t>(gj), 1});
      return;
    }
  }
  unsupported(s, "the split dim is not reshaped");
}

// A slice along the split dim must take whole blocks (GPT-2's q|k|v).
void TensorParallel::slice(const BoundSymbol& s, const Local& x) {
  IntList starts = s.attrs.get_ints("starts"), ends = s.attrs.get_ints("ends");
  const IntList& strides = s.attrs.get_ints("strides");
  const int64_t d = x.layout.dim;
  const int64_t local = b_.type_of(x.name).shape[d], full = local * tp_;
  const int64_t block = full / x.layout.blocks;
  Layout l = x.layout;
  if (starts[d] == 0 && ends[d] == full && strides[d] == 1) {
    ends[d] = local;
  } else {
    if (strides[d] != 1 || starts[d] % block != 0 || ends[d] % block != 0)
      unsupported(s, "a slice across the split dim must take whole blocks");
    l.blocks = (ends[d] - starts[d]) / block;
    starts[d] /= tp_;
    ends[d] /= tp_;
  }
  Attrs a = s.attrs;
  a.set("starts", starts).set("ends", ends);
  define(s, b_.emit1(OpId::Slice, {Operand::of(x.name)}, std::move(a)), l);
}

namespace {

bool follows_layout(OpId op) {
  return op_info(op).category == OpCategory::elementwise || op == OpId::Gelu || op == OpId::Silu ||
         op == OpId::ScaledDotProductAttention || op == OpId::Cat;
}

}  // namespace

void TensorParallel::statement(const BoundSymbol& s) {
  std::optional<Layout> split;
  for (size_t i = 0; i < s.inputs.size(); ++i)
    if (const Local x = in(s, i); x.layout.split() && !split) split = x.layout;
  if (!split) {
    BoundSymbol copy = s;
    rename_uses(copy, renames());
    if (s.op == OpId::BroadcastInDim) broadcasts_[s.outputs[0].name] = &s;
    b_.append(std::move(copy));
    for (const Proxy& o : s.outputs) values_[o.name] = {o.name, {}};
    return;
  }
  if (s.op == OpId::LinearCrossEntropy) return linear_cross_entropy(s);
  if (s.op == OpId::Matmul || s.op == OpId::Linear) return matmul(s);
  const Local x = in(s, 0);
  if (split->seq) {  // the sequence-parallel region: norms, residuals, biases, elementwise
    if ((s.op == OpId::LayerNorm || s.op == OpId::RmsNorm) && x.layout.seq) return norm(s, x);
    if (!follows_layout(s.op) || s.op == OpId::ScaledDotProductAttention || s.op == OpId::Cat)
      unsupported(s, "this op on a sequence-parallel value (split on the sequence) is not supported");
    std::vector<Operand> ins;
    for (size_t i = 0; i < s.inputs.size(); ++i) ins.push_back(localized(s, i, *split));
    return define(s, b_.emit1(s.op, std::move(ins), s.attrs), *split);
  }
  if (x.layout.vocab && (s.op == OpId::Reshape || s.op == OpId::Slice || s.op == OpId::BroadcastInDim))
    unsupported(s, "this op on a padded vocabulary (split with padding, as T does not divide it) is not supported");
  if (s.op == OpId::CrossEntropy) return cross_entropy(s, x);
  switch (s.op) {
    case OpId::Reshape: return reshape(s, x);
    case OpId::Slice: return slice(s, x);
    case OpId::Take: return take(s, x);
    case OpId::Permute: {
      const IntList& dims = s.attrs.get_ints("dims");
      int64_t at = 0;
      while (dims[at] != x.layout.dim) ++at;
      return define(s, b_.emit1(s.op, {Operand::of(x.name)}, s.attrs), Layout{at, x.layout.blocks, false, x.layout.vocab});
    }
    case OpId::BroadcastInDim: {
      const IntList& dims = s.attrs.get_ints("broadcast_dims");
      const int64_t at = dims.at(x.layout.dim);
      Shape shape = s.attrs.get_ints("shape");
      if (shape[at] != b_.type_of(x.name).shape[x.layout.dim] * tp_) unsupported(s, "broadcast along the split dim");
      shape[at] /= tp_;
      Attrs a = s.attrs;
      a.set("shape", shape);
      return define(s, b_.emit1(s.op, {Operand::of(x.name)}, std::move(a)), Layout{at, x.layout.blocks});
    }
    FSDPC_ELEMENTWISE_CASES
    FSDPC_REDUCTION_CASES
    FSDPC_MATMUL_CASES
    FSDPC_CREATION_CASES
    FSDPC_COLLECTIVE_CASES
    FSDPC_BUFFER_CASES
    FSDPC_FUSION_CASES
    FSDPC_MEMORY_CASES
    FSDPC_COMPOSITE_CASES  // cross_entropy: above; the others follow the layout or are refused, below
    case OpId::Pad: case OpId::Cat: case OpId::IndexAdd:
      break;
  }
  if (!follows_layout(s.op)) unsupported(s, "this op on a value split across tensor-parallel ranks is not supported");
  if (s.op == OpId::Cat && s.attrs.get_int("dim") == split->dim) unsupported(s, "cat along the split dim");
  std::vector<Operand> ins;
  for (size_t i = 0; i < s.inputs.size(); ++i) ins.push_back(localized(s, i, *split));
  define(s, b_.emit1(s.op, std::move(ins), s.attrs), *split);
}

}  // namespace tp_detail

using tp_detail::Layout;
using tp_detail::TensorParallel;

Trace tensor_parallel(const Trace& trace, const TensorParallelOptions& options) {
  const int tp = options.tp;
  if (tp < 1) fail("--tp must be at least 1, got ", tp);
  Trace out;
  out.name = trace.name;
  out.provenance = "tp";
  out.returns = trace.returns;
  out.next_id = trace.next_id;
  std::unordered_map<std::string, Layout> params;
  for (Proxy p : trace.args) {
    if (p.is_param()) {
      if (p.type.dist != DistType::none) fail("tp: parameter ", p.name, " is already ", dist_name(p.type.dist));
      if (auto s = options.plan.split(p.param_path, p.type.shape, tp)) {
        const int64_t n = p.type.shape.at(s->dim);
        if (!s->pad && n % (s->blocks * tp) != 0)
          fail("tp ", tp, ": parameter ", p.param_path, " has ", n, " entries on dim ", s->dim,
               (s->blocks > 1 ? " in " + std::to_string(s->blocks) + " blocks" : std::string()),
               ", not divisible across ", tp, " tensor-parallel ranks");
        p.type.shape = tensor_parallel_part_shape(*s, p.type.shape, tp);
        params[p.name] = Layout{s->dim, s->blocks, false, s->pad ? n : 0};
      }
    }
    out.args.push_back(std::move(p));
  }
  TensorParallel pass(out, tp, options.sequence_parallel);
  for (const auto& [name, l] : params) pass.param(name, l);
  for (const BoundSymbol& s : trace.bsyms) pass.statement(s);
  std::vector<std::string> names;
  trace.returns.collect_names(names);
  for (const std::string& n : names)
    if (!params.count(n) && pass.layout_of(n).split())
      fail("tp ", tp, ": the returned value ", n, " is split across tensor-parallel ranks; only replicated "
           "outputs are supported");
  rename_returns(out.returns, pass.renames());
  return out;
}

}  // namespace fsdpc
