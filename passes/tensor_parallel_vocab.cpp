// The tp pass's vocabulary-parallel half (passes/tensor_parallel_rewriter.h):
// Megatron's vocab-parallel embedding lookup and cross-entropy, the mask of
// a padded vocabulary's logits, and each rank's offset into what it holds.
#include <limits>

#include "ir/error.h"
#include "passes/tensor_parallel_rewriter.h"
#include "passes/vjp_rules_util.h"

namespace fsdpc::tp_detail {

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

// The fused head (passes/fuse_head.h) with its weight split by vocabulary
// rows, so that no rank holds its [tokens, V/T] logits either: each rank's
// linear_cross_entropy_stats gives, per token, the log-sum-exp of its
// slice's logits and the target's logit where its slice holds it, and the
// trace combines the ranks' rows as Megatron's cross-entropy combines their
// logits: lse = M + log(sum over ranks of exp(lse_r - M)), M the ranks' max
// lse (all_reduce max, no gradient: the shift cancels out of the loss), the
// sums and the target logits in one g. Two ops rather than one composite
// with the collectives inside: the all_reduces stay in the trace, where the
// schedule, the step simulator and the executors see them, and the stats'
// VJP (linear_cross_entropy_stats_grad, which recomputes the slice's logits
// a chunk at a time) is the op's own, so autodiff composes it with the
// collectives' rules; dh's parts are summed by f's backward, as for any
// column-parallel product. The padded classes of the last slices are left
// out inside the op (`vocab`). Under sequence parallelism h is gathered over
// the sequence first, as a column-parallel block's input is.
void TensorParallel::linear_cross_entropy(const BoundSymbol& s) {
  const Local h = in(s, 0), w = in(s, 1), targets = in(s, 2);
  if (targets.layout.split()) unsupported(s, "the targets must be replicated");
  if (h.layout.split() && !h.layout.seq) unsupported(s, "the head's input must be replicated or sequence-parallel");
  if (!w.layout.split()) {  // a head the plan leaves whole: every rank computes the whole loss
    const std::string x = h.layout.seq ? gather_seq_split_back(h.name) : h.name;
    return define(s, emit(s.op, {Operand::of(x), Operand::of(w.name), Operand::of(targets.name)}, s.attrs), Layout{});
  }
  if (w.layout.dim != 0 || w.layout.blocks != 1)
    unsupported(s, "only a head weight split by vocabulary rows (dim 0) is supported");
  const std::string x = h.layout.seq ? all_gather_seq(h.name) : f(h.name);
  const TensorType& wt = b_.type_of(w.name);
  const int64_t rows = wt.shape.at(0);
  Attrs a{{"vocab", w.layout.vocab ? w.layout.vocab : rows * tp_}};
  if (const AttrValue* chunk = s.attrs.find("chunk")) a.set("chunk", *chunk);
  const Proxy offset = rank_offset(rows, DType::i64, wt.device);
  const std::vector<Proxy> stats = b_.emit(
      OpId::LinearCrossEntropyStats,
      {Operand::of(x), Operand::of(w.name), Operand::of(targets.name), Operand::of(offset.name)}, std::move(a));
  const int64_t n = numel(stats[0].type.shape);
  auto flat = [&](const Proxy& p, Shape shape) {
    return p.type.shape == shape ? p : emit(OpId::Reshape, {Operand::of(p.name)}, Attrs{{"shape", IntList(shape)}});
  };
  Attrs max_attrs{{"group", std::string("tp")}, {"size", int64_t{tp_}}, {"op", std::string("max")},
                  {"grad", std::string("none")}};
  const Proxy lse = flat(stats[0], {n});
  const Proxy max = emit(OpId::Wait, {Operand::of(emit(OpId::AllReduce, {Operand::of(lse.name)}, std::move(max_attrs)).name)});
  const Proxy e = emit(OpId::Exp, {Operand::of(emit(OpId::Sub, {Operand::of(lse.name), Operand::of(max.name)}).name)});
  // One g for both row vectors: [2, n], summed over the ranks.
  const Proxy both = g(emit(OpId::Cat, {Operand::of(flat(e, {1, n}).name), Operand::of(flat(stats[1], {1, n}).name)},
                            Attrs{{"dim", int64_t{0}}}));
  auto part = [&](int64_t r) {
    return flat(emit(OpId::Slice, {Operand::of(both.name)},
                     Attrs{{"starts", IntList{r, 0}}, {"ends", IntList{r + 1, n}}, {"strides", IntList{1, 1}}}),
                {n});
  };
  const Proxy total_lse = emit(OpId::Add, {Operand::of(max.name), Operand::of(emit(OpId::Log, {Operand::of(part(0).name)}).name)});
  const Proxy nll = emit(OpId::Sub, {Operand::of(total_lse.name), Operand::of(part(1).name)});
  const Proxy total = emit(OpId::Sum, {Operand::of(nll.name)}, Attrs{{"dims", IntList{0}}});
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
  const Proxy cols = vjp_detail::indices_from(b_, rank_offset(v, DType::i64, t.device), v);  // global class ids
  Proxy pad = emit(OpId::Ge, {Operand::of(cols.name), Operand::lit(static_cast<double>(vocab))});
  pad = emit(OpId::BroadcastInDim, {Operand::of(pad.name)}, Attrs{{"shape", IntList{n, v}}, {"broadcast_dims", IntList{1}}});
  return emit(OpId::Where, {Operand::of(pad.name), Operand::lit(-std::numeric_limits<double>::infinity()), Operand::of(logits)})
      .name;
}

}  // namespace fsdpc::tp_detail
