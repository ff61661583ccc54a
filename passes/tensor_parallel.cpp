// tp: column- and row-parallel linears by a plan over parameter paths; see
// passes/tensor_parallel.h. Each value carries a layout (replicated, or split
// on one dim in blocks; a row-parallel product's partial sum is completed by
// g at once) and every statement a split value reaches is re-emitted with its
// rank-local shapes; the rest is copied unchanged, names kept.
#include "passes/tensor_parallel.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "ir/builder.h"
#include "ir/error.h"

namespace fsdpc {

namespace {

// dim < 0: replicated (every tp rank holds the whole value). `seq`: an
// activation of sequence parallelism, its dim 1 (the sequence) split.
// `vocab` > 0: the split dim is a padded vocabulary of that many entries
// (a padded table, its logits), each rank's part ceil(vocab / T) long, the
// entries past `vocab` padding.
struct Layout {
  int64_t dim = -1;
  int64_t blocks = 1;
  bool seq = false;
  int64_t vocab = 0;
  bool split() const { return dim >= 0; }
  bool same_cut(const Layout& o) const { return dim == o.dim && blocks == o.blocks && seq == o.seq && vocab == o.vocab; }
};
constexpr Layout kSeq{1, 1, true};

struct Local {
  std::string name;  // the value's name in the new trace
  Layout layout;
};

class TensorParallel {
 public:
  TensorParallel(Trace& out, int tp, bool sp) : b_(out), tp_(tp), sp_(sp) {}
  void param(const std::string& name, Layout l) { values_[name] = {name, l}; }
  void statement(const BoundSymbol& s);
  const std::unordered_map<std::string, std::string>& renames() const { return renamed_; }
  Layout layout_of(const std::string& old) const {
    auto it = values_.find(old);
    return it == values_.end() ? Layout{} : it->second.layout;
  }

 private:
  Local in(const BoundSymbol& s, size_t i) const;
  void define(const BoundSymbol& s, const Proxy& out, Layout l);
  std::string f(const std::string& x);
  Proxy g(const Proxy& partial);
  Proxy reduce_scatter_seq(const BoundSymbol& s, const Proxy& partial);
  std::string all_gather_seq(const std::string& x);
  Operand scatter_seq(const BoundSymbol& s, const std::string& replicated);
  void norm(const BoundSymbol& s, const Local& x);
  Operand localized(const BoundSymbol& s, size_t i, Layout want);
  void matmul(const BoundSymbol& s);
  void reshape(const BoundSymbol& s, const Local& x);
  void slice(const BoundSymbol& s, const Local& x);
  void take(const BoundSymbol& s, const Local& table);
  void cross_entropy(const BoundSymbol& s, const Local& logits);
  std::string mask_padding(const std::string& logits, int64_t vocab);
  Proxy rank_offset(int64_t rows, DType dtype, const Device& device);
  std::pair<Proxy, Proxy> local_ids(const std::string& ids, int64_t rows);
  Proxy emit(OpId op, std::vector<Operand> ins, Attrs a = {}) { return b_.emit1(op, std::move(ins), std::move(a)); }
  [[noreturn]] void unsupported(const BoundSymbol& s, const std::string& why) const;

  TraceBuilder b_;
  int tp_;
  bool sp_;  // sequence parallelism: the activations between tp blocks split on the sequence
  std::unordered_map<std::string, Local> values_;     // old name -> new name, layout
  std::unordered_map<std::string, std::string> renamed_;  // old name -> new, where they differ
  std::unordered_map<std::string, std::string> f_;    // new name -> its f output
  std::unordered_map<std::string, std::string> gathered_;  // new name -> its all_gather over the sequence
  std::unordered_map<std::string, const BoundSymbol*> broadcasts_;  // old name -> broadcast_in_dim
  std::unordered_map<std::string, std::string> axis_index_;  // device -> this rank's tp index
  std::unordered_map<std::string, std::string> offsets_;     // device/rows/dtype -> rank_offset's value
};

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
  Proxy off = rank_offset(local, DType::i64, t.device);  // this rank's first position
  off = emit(OpId::BroadcastInDim, {Operand::of(off.name)}, Attrs{{"shape", IntList{local}}, {"broadcast_dims", IntList{}}});
  Proxy positions = emit(OpId::Iota, {}, Attrs{{"length", local}, {"dtype", std::string("i64")}, {"device", device_name(t.device)}});
  positions = emit(OpId::Add, {Operand::of(positions.name), Operand::of(off.name)});
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
    // the plan leaves whole): every rank computes the whole product, so its
    // cotangent is split back, not summed.
    Attrs a{{"group", std::string("tp")}, {"size", int64_t{tp_}}, {"dim", int64_t{1}}, {"grad", std::string("split")}};
    ins[0] = Operand::of(emit(OpId::Wait, {Operand::of(emit(OpId::AllGather, {ins[0]}, std::move(a)).name)}).name);
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

// The first of this rank's `rows` (vocabulary rows, or sequence positions
// under sequence parallelism), `tp rank * rows`, as a `dtype` scalar.
Proxy TensorParallel::rank_offset(int64_t rows, DType dtype, const Device& device) {
  const std::string dev = device_name(device);
  const std::string key = dev + "/" + std::to_string(rows) + "/" + std::string(dtype_name(dtype));
  if (auto done = offsets_.find(key); done != offsets_.end()) return Proxy{done->second, b_.type_of(done->second), "", true};
  auto it = axis_index_.find(dev);
  if (it == axis_index_.end()) {
    Attrs a{{"group", std::string("tp")}, {"size", int64_t{tp_}}, {"device", dev}};
    it = axis_index_.emplace(dev, emit(OpId::AxisIndex, {}, std::move(a)).name).first;
  }
  Proxy off = emit(OpId::Mul, {Operand::of(it->second), Operand::lit(static_cast<double>(rows))});
  if (dtype != DType::i64)
    off = emit(OpId::ConvertElementType, {Operand::of(off.name)}, Attrs{{"dtype", std::string(dtype_name(dtype))}});
  offsets_[key] = off.name;
  return off;
}

// Ids as rows of this rank's part of a table of `rows` rows per rank: the
// local row (0 for an id another rank holds) and whether this rank holds it.
std::pair<Proxy, Proxy> TensorParallel::local_ids(const std::string& ids, int64_t rows) {
  const TensorType& it = b_.type_of(ids);
  Proxy off = rank_offset(rows, it.dtype, it.device);
  off = emit(OpId::BroadcastInDim, {Operand::of(off.name)}, Attrs{{"shape", IntList(it.shape)}, {"broadcast_dims", IntList{}}});
  Proxy local = emit(OpId::Sub, {Operand::of(ids), Operand::of(off.name)});
  Proxy below = emit(OpId::Lt, {Operand::of(local.name), Operand::lit(0)});
  Proxy clamped = emit(OpId::Where, {Operand::of(below.name), Operand::lit(0), Operand::of(local.name)});
  Proxy above = emit(OpId::Ge, {Operand::of(clamped.name), Operand::lit(static_cast<double>(rows))});
  Proxy safe = emit(OpId::Where, {Operand::of(above.name), Operand::lit(0), Operand::of(clamped.name)});
  return {safe, emit(OpId::Eq, {Operand::of(local.name), Operand::of(safe.name)})};  // in range
}

// Vocab-parallel embedding: ids outside this rank's rows look up row 0 and
// are zeroed, so g's sum over the tp ranks is the full lookup. The backward
// (where's, then take's rule) adds each cotangent row to the rank that holds
// its id only.
void TensorParallel::take(const BoundSymbol& s, const Local& table) {
  if (table.layout.dim != 0 || table.layout.blocks != 1 || s.attrs.get_int("dim") != 0 || in(s, 1).layout.split())
    unsupported(s, "only a lookup of rows (dim 0) in a table split by rows is supported");
  const std::string ids = in(s, 1).name;
  const Shape idx_shape = b_.type_of(ids).shape;
  // A padded table's rows per rank, ceil(V / T): no id reaches its padding.
  const auto [safe, mine] = local_ids(ids, b_.type_of(table.name).shape[0]);
  Proxy rows_out = emit(OpId::Take, {Operand::of(table.name), Operand::of(safe.name)}, s.attrs);
  IntList dims(idx_shape.size());
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = static_cast<int64_t>(i);
  Proxy keep = emit(OpId::BroadcastInDim, {Operand::of(mine.name)},
                    Attrs{{"shape", IntList(rows_out.type.shape)}, {"broadcast_dims", std::move(dims)}});
  Proxy partial = emit(OpId::Where, {Operand::of(keep.name), Operand::of(rows_out.name), Operand::lit(0)});
  if (sp_) return define(s, reduce_scatter_seq(s, partial), kSeq);
  define(s, g(partial), Layout{});
}

// Megatron's vocab-parallel cross-entropy on logits split on the vocabulary
// (the last dim): the loss is mean(log(sum exp z) - z[target]) with z the
// logits shifted by their global row max. The max crosses the ranks without
// a gradient (the shift cancels out of the loss); each rank's row sums of
// exp z and its share of z[target] (zero unless it holds the target's class)
// cross in one g. The full logits are never gathered. A padded vocabulary's
// padded columns are masked out first.
void TensorParallel::cross_entropy(const BoundSymbol& s, const Local& logits) {
  const Shape& ls = b_.type_of(logits.name).shape;
  if (logits.layout.dim != static_cast<int64_t>(ls.size()) - 1 || logits.layout.blocks != 1 || in(s, 1).layout.split())
    unsupported(s, "only logits split on the vocabulary (their last dim) are supported");
  const int64_t v = ls.back(), n = numel(ls) / v;
  const Device device = b_.type_of(logits.name).device;
  std::string x = logits.name, targets = in(s, 1).name;
  if (ls.size() != 2) x = emit(OpId::Reshape, {Operand::of(x)}, Attrs{{"shape", IntList{n, v}}}).name;
  if (logits.layout.vocab) x = mask_padding(x, logits.layout.vocab);
  if (b_.type_of(targets).shape.size() != 1)
    targets = emit(OpId::Reshape, {Operand::of(targets)}, Attrs{{"shape", IntList{n}}}).name;
  auto across_rows = [&](const std::string& row) {  // [n] along dim 0 of [n, v]
    return emit(OpId::BroadcastInDim, {Operand::of(row)}, Attrs{{"shape", IntList{n, v}}, {"broadcast_dims", IntList{0}}});
  };
  Proxy local_max = emit(OpId::Amax, {Operand::of(x)}, Attrs{{"dims", IntList{1}}});
  Attrs max_attrs{{"group", std::string("tp")}, {"size", int64_t{tp_}}, {"op", std::string("max")},
                  {"grad", std::string("none")}};
  Proxy max = emit(OpId::Wait, {Operand::of(emit(OpId::AllReduce, {Operand::of(local_max.name)}, std::move(max_attrs)).name)});
  Proxy z = emit(OpId::Sub, {Operand::of(x), Operand::of(across_rows(max.name).name)});
  Proxy sum_exp = emit(OpId::Sum, {Operand::of(emit(OpId::Exp, {Operand::of(z.name)}).name)}, Attrs{{"dims", IntList{1}}});
  // z[target] where this rank holds the target's class, else 0: a lookup in
  // z flattened (row * v + local class), never a [n, v] one-hot.
  auto [safe, mine] = local_ids(targets, v);
  if (b_.type_of(targets).dtype != DType::i64)  // n * v may pass 2^31
    safe = emit(OpId::ConvertElementType, {Operand::of(safe.name)}, Attrs{{"dtype", std::string("i64")}});
  Proxy rows = emit(OpId::Iota, {}, Attrs{{"length", n}, {"dtype", std::string("i64")}, {"device", device_name(device)}});
  Proxy at = emit(OpId::Add, {Operand::of(emit(OpId::Mul, {Operand::of(rows.name), Operand::lit(static_cast<double>(v))}).name),
                              Operand::of(safe.name)});
  Proxy flat = emit(OpId::Reshape, {Operand::of(z.name)}, Attrs{{"shape", IntList{n * v}}});
  Proxy target = emit(OpId::Take, {Operand::of(flat.name), Operand::of(at.name)}, Attrs{{"dim", int64_t{0}}});
  Proxy picked = emit(OpId::Where, {Operand::of(mine.name), Operand::of(target.name), Operand::lit(0)});
  // One g for both row vectors: [2, n], summed over the ranks.
  auto row = [&](const Proxy& p) { return Operand::of(emit(OpId::Reshape, {Operand::of(p.name)}, Attrs{{"shape", IntList{1, n}}}).name); };
  Proxy both = g(emit(OpId::Cat, {row(sum_exp), row(picked)}, Attrs{{"dim", int64_t{0}}}));
  auto part = [&](int64_t r) {
    Proxy p = emit(OpId::Slice, {Operand::of(both.name)},
                   Attrs{{"starts", IntList{r, 0}}, {"ends", IntList{r + 1, n}}, {"strides", IntList{1, 1}}});
    return emit(OpId::Reshape, {Operand::of(p.name)}, Attrs{{"shape", IntList{n}}});
  };
  Proxy lse = emit(OpId::Log, {Operand::of(part(0).name)});
  Proxy nll = emit(OpId::Sub, {Operand::of(lse.name), Operand::of(part(1).name)});
  Proxy total = emit(OpId::Sum, {Operand::of(nll.name)}, Attrs{{"dims", IntList{0}}});
  define(s, emit(OpId::Div, {Operand::of(total.name), Operand::lit(static_cast<double>(n))}), Layout{});
}

// Logits [n, v] of a padded vocabulary with the columns past `vocab` (global
// index iota(v) + this rank's offset) -inf: they add exp(-inf) = 0 to the
// sums, never win the max, and where's backward gives them a zero
// cotangent, so the padded rows of the table get exactly zero gradients and
// stay zero through the optimizer.
std::string TensorParallel::mask_padding(const std::string& logits, int64_t vocab) {
  const TensorType& t = b_.type_of(logits);
  const int64_t n = t.shape.at(0), v = t.shape.at(1);
  Proxy off = rank_offset(v, DType::i64, t.device);
  off = emit(OpId::BroadcastInDim, {Operand::of(off.name)}, Attrs{{"shape", IntList{v}}, {"broadcast_dims", IntList{}}});
  Proxy cols = emit(OpId::Iota, {}, Attrs{{"length", v}, {"dtype", std::string("i64")}, {"device", device_name(t.device)}});
  cols = emit(OpId::Add, {Operand::of(cols.name), Operand::of(off.name)});
  Proxy pad = emit(OpId::Ge, {Operand::of(cols.name), Operand::lit(static_cast<double>(vocab))});
  pad = emit(OpId::BroadcastInDim, {Operand::of(pad.name)}, Attrs{{"shape", IntList{n, v}}, {"broadcast_dims", IntList{1}}});
  return emit(OpId::Where, {Operand::of(pad.name), Operand::lit(-std::numeric_limits<double>::infinity()), Operand::of(logits)})
      .name;
}

bool follows_layout(OpId op) {
  return op_info(op).category == OpCategory::elementwise || op == OpId::Gelu || op == OpId::Silu ||
         op == OpId::ScaledDotProductAttention || op == OpId::Cat;
}

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
  switch (s.op) {
    case OpId::Reshape: return reshape(s, x);
    case OpId::Slice: return slice(s, x);
    case OpId::Take: return take(s, x);
    case OpId::CrossEntropy: return cross_entropy(s, x);
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
    default: break;
  }
  if (!follows_layout(s.op)) unsupported(s, "this op on a value split across tensor-parallel ranks is not supported");
  if (s.op == OpId::Cat && s.attrs.get_int("dim") == split->dim) unsupported(s, "cat along the split dim");
  std::vector<Operand> ins;
  for (size_t i = 0; i < s.inputs.size(); ++i) ins.push_back(localized(s, i, *split));
  define(s, b_.emit1(s.op, std::move(ins), s.attrs), *split);
}

}  // namespace

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
      if (auto s = tensor_parallel_split(p.param_path, p.type.shape, tp)) {
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
