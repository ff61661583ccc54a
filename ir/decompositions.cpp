// Decompositions of the composite ops into prims (docs/ir.md "Composites").
// Executors that do not claim a composite run these; they follow PyTorch's
// definitions exactly so the reference executor and gradient checks agree.
#include "ir/decompositions.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>
#include <utility>
#include <variant>

#include "ir/error.h"
#include "ir/meta.h"

namespace fsdpc {

namespace {

Operand op(const Proxy& p) { return Operand::of(p.name); }

Proxy input(const TraceBuilder& b, const BoundSymbol& c, size_t i) {
  FSDPC_CHECK(i < c.inputs.size() && !c.inputs[i].is_scalar())
      << op_name(c.op) << ": tensor input " << i << " missing";
  Proxy p;
  p.name = c.inputs[i].name;
  p.type = b.type_of(p.name);
  return p;
}

int64_t rank(const Proxy& p) { return static_cast<int64_t>(p.type.shape.size()); }

Proxy unary(TraceBuilder& b, OpId id, const Proxy& x) { return b.emit1(id, {op(x)}); }

Proxy binary(TraceBuilder& b, OpId id, const Proxy& x, const Proxy& y) {
  return b.emit1(id, {op(x), op(y)});
}

// Scalar literals take the tensor operand's dtype, so these constants work
// unchanged for f16/bf16/f32/f64 inputs.
Proxy binary(TraceBuilder& b, OpId id, const Proxy& x, double y) {
  return b.emit1(id, {op(x), Operand::lit(y)});
}

Proxy reduce(TraceBuilder& b, OpId id, const Proxy& x, IntList dims) {
  return b.emit1(id, {op(x)}, Attrs{{"dims", std::move(dims)}});
}

Proxy broadcast(TraceBuilder& b, const Proxy& x, const Shape& shape, IntList broadcast_dims) {
  return b.emit1(OpId::BroadcastInDim, {op(x)},
                 Attrs{{"shape", IntList(shape)}, {"broadcast_dims", std::move(broadcast_dims)}});
}

Proxy reshape(TraceBuilder& b, const Proxy& x, const Shape& shape) {
  return b.emit1(OpId::Reshape, {op(x)}, Attrs{{"shape", IntList(shape)}});
}

Proxy permute(TraceBuilder& b, const Proxy& x, IntList dims) {
  return b.emit1(OpId::Permute, {op(x)}, Attrs{{"dims", std::move(dims)}});
}

// Elementwise ops never broadcast implicitly, so a value reduced over `dim`
// has to be broadcast back to the full shape before it meets the input.
Proxy broadcast_back(TraceBuilder& b, const Proxy& reduced, const Shape& full, int64_t dim) {
  IntList keep;
  for (int64_t i = 0; i < static_cast<int64_t>(full.size()); ++i)
    if (i != dim) keep.push_back(i);
  return broadcast(b, reduced, full, std::move(keep));
}

// x - max(x) over `dim`: the shift that keeps exp() from overflowing.
Proxy shifted(TraceBuilder& b, const Proxy& x, int64_t dim) {
  Proxy m = reduce(b, OpId::Amax, x, {dim});
  return binary(b, OpId::Sub, x, broadcast_back(b, m, x.type.shape, dim));
}

// Stable softmax over `dim`, shared by softmax and attention.
Proxy softmax_prims(TraceBuilder& b, const Proxy& x, int64_t dim) {
  Proxy e = unary(b, OpId::Exp, shifted(b, x, dim));
  Proxy s = reduce(b, OpId::Sum, e, {dim});
  return binary(b, OpId::Div, e, broadcast_back(b, s, x.type.shape, dim));
}

// log_softmax = z - log(sum(exp(z))) with z = x - max(x): never exponentiates
// anything positive, so it is exact where log(softmax(x)) would underflow.
Proxy log_softmax_prims(TraceBuilder& b, const Proxy& x, int64_t dim) {
  Proxy z = shifted(b, x, dim);
  Proxy lse = unary(b, OpId::Log, reduce(b, OpId::Sum, unary(b, OpId::Exp, z), {dim}));
  return binary(b, OpId::Sub, z, broadcast_back(b, lse, x.type.shape, dim));
}

Proxy decompose_linear(TraceBuilder& b, const BoundSymbol& c) {
  Proxy x = input(b, c, 0);
  Proxy w = input(b, c, 1);
  // matmul wants a matrix on the left; a 1-D x is a single row.
  bool vector_x = rank(x) == 1;
  if (vector_x) x = reshape(b, x, {1, x.type.shape[0]});
  Proxy y = binary(b, OpId::Matmul, x, permute(b, w, {1, 0}));
  if (c.inputs.size() == 3) {
    Proxy bias = broadcast(b, input(b, c, 2), y.type.shape, {rank(y) - 1});
    y = binary(b, OpId::Add, y, bias);
  }
  if (vector_x) y = reshape(b, y, {y.type.shape[1]});
  return y;
}

// PyTorch's gelu(approximate='tanh').
Proxy decompose_gelu(TraceBuilder& b, const BoundSymbol& c) {
  if (const AttrValue* a = c.attrs.find("approximate");
      a && !(std::holds_alternative<std::string>(*a) && std::get<std::string>(*a) == "tanh"))
    fail("gelu: only approximate=tanh has a decomposition");
  const double k_beta = std::sqrt(2.0 / std::numbers::pi);
  constexpr double kKappa = 0.044715;
  Proxy x = input(b, c, 0);
  Proxy x3 = binary(b, OpId::Mul, binary(b, OpId::Mul, x, x), x);
  Proxy inner = binary(b, OpId::Add, x, binary(b, OpId::Mul, x3, kKappa));
  Proxy t = unary(b, OpId::Tanh, binary(b, OpId::Mul, inner, k_beta));
  Proxy half_x = binary(b, OpId::Mul, x, 0.5);
  return binary(b, OpId::Mul, half_x, binary(b, OpId::Add, t, 1.0));
}

Proxy decompose_softmax(TraceBuilder& b, const BoundSymbol& c) {
  return softmax_prims(b, input(b, c, 0), c.attrs.get_int("dim"));
}

// Biased variance and eps inside the rsqrt, as torch.nn.functional.layer_norm.
Proxy decompose_layer_norm(TraceBuilder& b, const BoundSymbol& c) {
  Proxy x = input(b, c, 0);
  const Shape& shape = x.type.shape;
  const int64_t last = rank(x) - 1;
  const double n = static_cast<double>(shape[last]);
  Proxy mean = binary(b, OpId::Div, reduce(b, OpId::Sum, x, {last}), n);
  Proxy xc = binary(b, OpId::Sub, x, broadcast_back(b, mean, shape, last));
  Proxy var = binary(b, OpId::Div, reduce(b, OpId::Sum, binary(b, OpId::Mul, xc, xc), {last}), n);
  // rsqrt on the reduced shape: one per row instead of one per element.
  Proxy rstd = unary(b, OpId::Rsqrt, binary(b, OpId::Add, var, c.attrs.get_double("eps")));
  Proxy y = binary(b, OpId::Mul, xc, broadcast_back(b, rstd, shape, last));
  y = binary(b, OpId::Mul, y, broadcast(b, input(b, c, 1), shape, {last}));
  return binary(b, OpId::Add, y, broadcast(b, input(b, c, 2), shape, {last}));
}

// silu(x) = x * sigmoid(x), written x / (1 + exp(-x)): exp(-x) overflows to
// inf for x below about -88 (f32), and x / inf is the correct -0.
Proxy decompose_silu(TraceBuilder& b, const BoundSymbol& c) {
  Proxy x = input(b, c, 0);
  return binary(b, OpId::Div, x, binary(b, OpId::Add, unary(b, OpId::Exp, unary(b, OpId::Neg, x)), 1.0));
}

Proxy convert(TraceBuilder& b, const Proxy& x, DType to) {
  if (x.type.dtype == to) return x;
  return b.emit1(OpId::ConvertElementType, {op(x)}, Attrs{{"dtype", std::string(dtype_name(to))}});
}

// Hugging Face's LlamaRMSNorm: the mean square over the last dim in f32
// (x narrower than f32 is upcast first; f32 and f64 stay as they are),
// x * rsqrt(ms + eps), cast back to x's dtype, then times weight.
Proxy decompose_rms_norm(TraceBuilder& b, const BoundSymbol& c) {
  Proxy x = input(b, c, 0);
  const DType dt = x.type.dtype;
  const Shape& shape = x.type.shape;
  const int64_t last = rank(x) - 1;
  Proxy xf = convert(b, x, dtype_size(dt) < 4 ? DType::f32 : dt);
  Proxy ms = binary(b, OpId::Div, reduce(b, OpId::Sum, binary(b, OpId::Mul, xf, xf), {last}),
                    static_cast<double>(shape[last]));
  Proxy rstd = unary(b, OpId::Rsqrt, binary(b, OpId::Add, ms, c.attrs.get_double("eps")));
  Proxy y = convert(b, binary(b, OpId::Mul, xf, broadcast_back(b, rstd, shape, last)), dt);
  return binary(b, OpId::Mul, broadcast(b, input(b, c, 1), shape, {last}), y);
}

// Top-left aligned causal mask (PyTorch's ones(Tq, Tk).tril()): key j is
// visible to query i when j <= i. Masked scores become -inf before softmax.
Proxy causal_mask(TraceBuilder& b, const Proxy& scores, const Device& device) {
  const Shape& s = scores.type.shape;
  const int64_t r = static_cast<int64_t>(s.size());
  const int64_t tq = s[r - 2], tk = s[r - 1];
  auto iota = [&](int64_t n) {
    return b.emit1(OpId::Iota, {},
                   Attrs{{"length", n}, {"dtype", std::string(dtype_name(DType::i64))},
                         {"device", device_name(device)}});
  };
  Proxy row = broadcast(b, iota(tq), {tq, tk}, {0});
  Proxy col = broadcast(b, iota(tk), {tq, tk}, {1});
  Proxy keep = broadcast(b, binary(b, OpId::Ge, row, col), s, {r - 2, r - 1});
  return b.emit1(OpId::Where, {op(keep), op(scores),
                               Operand::lit(-std::numeric_limits<double>::infinity())});
}

// The permutation that transposes the last two dims of a rank-r stack.
IntList swap_last_two(int64_t r) {
  IntList t;
  for (int64_t i = 0; i < r; ++i) t.push_back(i);
  std::swap(t[r - 2], t[r - 1]);
  return t;
}

Proxy decompose_sdpa(TraceBuilder& b, const BoundSymbol& c) {
  Proxy q = input(b, c, 0);
  Proxy k = input(b, c, 1);
  Proxy v = input(b, c, 2);
  Proxy s = binary(b, OpId::Matmul, q, permute(b, k, swap_last_two(rank(k))));
  // PyTorch's default scale is 1/sqrt(D) when none is given.
  const double d = static_cast<double>(q.type.shape.back());
  s = binary(b, OpId::Mul, s, c.attrs.get_double_or("scale", 1.0 / std::sqrt(d)));
  if (c.attrs.get_bool_or("is_causal", false)) s = causal_mask(b, s, q.type.device);
  Proxy p = softmax_prims(b, s, rank(s) - 1);
  return binary(b, OpId::Matmul, p, v);
}

// Attention's gradients for the output's cotangent g, the probabilities
// recomputed: p = softmax(mask(q kᵀ scale)); gv = pᵀ g, gs = scale * p *
// (g vᵀ - rowsum(g vᵀ * p)), gq = gs k, gk = gsᵀ q. With bf16 (or f16) q,
// k and v the products stay narrow and everything between them is f32, as
// in the forward kernel (cpu_attention.cpp): q kᵀ and g vᵀ write their f32
// accumulators (matmul's out_dtype), the mask, softmax and its backward run
// in f32 (and fuse), and p and gs are rounded once for the products that
// read them. This is what executors without an attention-backward kernel
// run; it holds several [.., Tq, Tk] values at once.
std::vector<Proxy> decompose_sdpa_grad(TraceBuilder& b, const BoundSymbol& c) {
  const Proxy q = input(b, c, 0), k = input(b, c, 1), v = input(b, c, 2), g = input(b, c, 3);
  const int64_t last = rank(q) - 1;
  const IntList t = swap_last_two(rank(q));
  const double scale = c.attrs.get_double("scale");
  const DType low = q.type.dtype;
  const bool mixed = low == DType::bf16 || low == DType::f16;
  auto scores = [&](const Proxy& x, const Proxy& y) {  // x @ y, in f32 when mixed
    if (!mixed) return binary(b, OpId::Matmul, x, y);
    return b.emit1(OpId::Matmul, {op(x), op(y)}, Attrs{{"out_dtype", std::string(dtype_name(DType::f32))}});
  };
  auto as_low = [&](const Proxy& x) { return mixed ? convert(b, x, low) : x; };
  Proxy s = binary(b, OpId::Mul, scores(q, permute(b, k, t)), scale);
  if (c.attrs.get_bool_or("is_causal", false)) s = causal_mask(b, s, q.type.device);
  Proxy p = b.emit1(OpId::Softmax, {op(s)}, Attrs{{"dim", last}});
  Proxy gv = binary(b, OpId::Matmul, permute(b, as_low(p), t), g);
  Proxy gp = scores(g, permute(b, v, t));
  Proxy gpp = binary(b, OpId::Mul, gp, p);
  Proxy row = broadcast_back(b, reduce(b, OpId::Sum, gpp, {last}), p.type.shape, last);
  Proxy ds = binary(b, OpId::Sub, gpp, binary(b, OpId::Mul, p, row));
  Proxy gs = as_low(binary(b, OpId::Mul, ds, scale));
  Proxy gq = binary(b, OpId::Matmul, gs, k);
  Proxy gk = binary(b, OpId::Matmul, permute(b, gs, t), q);
  return {gq, gk, gv};
}

// Mean over all positions of -log_softmax(logits)[target]; the target's entry
// is picked with a one-hot product, which keeps the graph prims-only and
// differentiable with the elementwise rules.
Proxy decompose_cross_entropy(TraceBuilder& b, const BoundSymbol& c) {
  Proxy logits = input(b, c, 0);
  Proxy targets = input(b, c, 1);
  const int64_t v = logits.type.shape.back();
  const int64_t n = numel(logits.type.shape) / v;
  if (rank(logits) != 2) logits = reshape(b, logits, {n, v});
  if (rank(targets) != 1) targets = reshape(b, targets, {n});
  Proxy logp = log_softmax_prims(b, logits, 1);
  Proxy classes = b.emit1(OpId::Iota, {},
                          Attrs{{"length", v},
                                {"dtype", std::string(dtype_name(targets.type.dtype))},
                                {"device", device_name(logits.type.device)}});
  Proxy hit = binary(b, OpId::Eq, broadcast(b, classes, {n, v}, {1}),
                     broadcast(b, targets, {n, v}, {0}));
  Proxy onehot = b.emit1(OpId::ConvertElementType, {op(hit)},
                         Attrs{{"dtype", std::string(dtype_name(logits.type.dtype))}});
  Proxy picked = reduce(b, OpId::Sum, binary(b, OpId::Mul, logp, onehot), {0, 1});
  return binary(b, OpId::Div, unary(b, OpId::Neg, picked), static_cast<double>(n));
}

// h [..., C] as [n, C] rows and targets [...] as [n].
std::pair<Proxy, Proxy> head_rows(TraceBuilder& b, const BoundSymbol& c) {
  Proxy h = input(b, c, 0);
  Proxy targets = input(b, c, 2);
  const int64_t features = h.type.shape.back();
  const int64_t n = numel(h.type.shape) / std::max<int64_t>(features, 1);
  if (rank(h) != 2) h = reshape(b, h, {n, features});
  if (rank(targets) != 1) targets = reshape(b, targets, {n});
  return {h, targets};
}

// The head's logits [n, V] = linear(h, w), in the loss's dtype.
Proxy head_logits(TraceBuilder& b, const Proxy& h, const BoundSymbol& c) {
  Proxy logits = binary(b, OpId::Linear, h, input(b, c, 1));
  return convert(b, logits, linear_cross_entropy_loss_dtype(h.type.dtype));
}

// linear then cross_entropy: the unfused head, exactly (`chunk` only tiles
// a kernel's work).
Proxy decompose_linear_cross_entropy(TraceBuilder& b, const BoundSymbol& c) {
  auto [h, targets] = head_rows(b, c);
  return binary(b, OpId::CrossEntropy, head_logits(b, h, c), targets);
}

// linear's rule for the logits' cotangent dlogits [n, V] (the loss's
// dtype), cast to h's dtype: dh = dlogits w (h's shape), dw = dlogitsᵀ h
// (in dw_dtype when set).
std::vector<Proxy> head_gradients(TraceBuilder& b, const BoundSymbol& c, const Proxy& h, const Proxy& dz) {
  Proxy dlogits = convert(b, dz, h.type.dtype);
  Proxy dh = binary(b, OpId::Matmul, dlogits, input(b, c, 1));
  const Shape h_shape = input(b, c, 0).type.shape;
  if (dh.type.shape != h_shape) dh = reshape(b, dh, h_shape);
  Attrs dw_attrs;
  if (c.attrs.has("dw_dtype")) dw_attrs.set("out_dtype", c.attrs.get_str("dw_dtype"));
  Proxy dw = b.emit1(OpId::Matmul, {op(permute(b, dlogits, {1, 0})), op(h)}, std::move(dw_attrs));
  return {dh, dw};
}

// What autodiff makes of the decomposition above, from the logits: their
// cotangent (softmax - onehot) * g / n (cross_entropy's rule,
// passes/vjp_rules_nn.cpp, the one-hot subtracted by an index_add), cast to
// h's dtype, then linear's rule: dh = dlogits w, dw = dlogitsᵀ h. Only
// executors without the fused kernels run this; it holds [n, V] values, as
// the unfused head does.
std::vector<Proxy> head_grad_from_logits(TraceBuilder& b, const BoundSymbol& c, const Proxy& h,
                                         const Proxy& targets, const Proxy& logits) {
  const int64_t n = logits.type.shape[0], v = logits.type.shape[1];
  const DType dt = logits.type.dtype;
  const std::string device = device_name(logits.type.device);
  Proxy p = b.emit1(OpId::Softmax, {op(logits)}, Attrs{{"dim", int64_t{1}}});
  Proxy rows = b.emit1(OpId::Iota, {},
                       Attrs{{"length", n}, {"dtype", std::string(dtype_name(targets.type.dtype))}, {"device", device}});
  Proxy at = binary(b, OpId::Add, binary(b, OpId::Mul, rows, static_cast<double>(v)), targets);
  Proxy minus_one = b.emit1(OpId::Full, {},
                            Attrs{{"shape", IntList{n}}, {"value", -1.0}, {"dtype", std::string(dtype_name(dt))},
                                  {"device", device}});
  Proxy diff = reshape(
      b, b.emit1(OpId::IndexAdd, {op(reshape(b, p, {n * v})), op(at), op(minus_one)}, Attrs{{"dim", int64_t{0}}}),
      {n, v});
  Proxy scale = broadcast(b, binary(b, OpId::Div, input(b, c, 3), static_cast<double>(n)), {n, v}, {});
  return head_gradients(b, c, h, binary(b, OpId::Mul, diff, scale));
}

std::vector<Proxy> decompose_linear_cross_entropy_grad(TraceBuilder& b, const BoundSymbol& c) {
  auto [h, targets] = head_rows(b, c);
  return head_grad_from_logits(b, c, h, targets, head_logits(b, h, c));
}

// The loss, then its gradients for g, from one product of logits: the
// unfused head's forward and backward with nothing recomputed.
std::vector<Proxy> decompose_linear_cross_entropy_with_grad(TraceBuilder& b, const BoundSymbol& c) {
  auto [h, targets] = head_rows(b, c);
  Proxy logits = head_logits(b, h, c);
  std::vector<Proxy> out = head_grad_from_logits(b, c, h, targets, logits);
  out.insert(out.begin(), binary(b, OpId::CrossEntropy, logits, targets));
  return out;
}

// A vocabulary-parallel head's slice (linear_cross_entropy_stats): its
// logits [n, V/T] in the loss's dtype, which of its classes are real (the
// global class offset + j below `vocab`), and each row's target as a flat
// index into the logits (`at`), valid where this slice holds it (`mine`).
struct SliceHead {
  Proxy h, logits, valid, at, mine;
};

SliceHead slice_head(TraceBuilder& b, const BoundSymbol& c) {
  auto [h, targets] = head_rows(b, c);
  SliceHead s{h, head_logits(b, h, c), {}, {}, {}};
  const int64_t n = s.logits.type.shape[0], v = s.logits.type.shape[1];
  const std::string device = device_name(s.logits.type.device);
  Proxy offset = convert(b, input(b, c, 3), DType::i64);
  if (targets.type.dtype != DType::i64) targets = convert(b, targets, DType::i64);
  auto iota = [&](int64_t length) {
    return b.emit1(OpId::Iota, {}, Attrs{{"length", length}, {"dtype", std::string("i64")}, {"device", device}});
  };
  Proxy classes = binary(b, OpId::Add, iota(v), broadcast(b, offset, {v}, {}));
  s.valid = broadcast(b, binary(b, OpId::Lt, classes, static_cast<double>(c.attrs.get_int("vocab"))), {n, v}, {1});
  // The target's column in the slice, 0 where another slice holds it.
  Proxy local = binary(b, OpId::Sub, targets, broadcast(b, offset, {n}, {}));
  Proxy inside = b.emit1(OpId::Where, {op(binary(b, OpId::Lt, local, 0.0)), Operand::lit(0), op(local)});
  Proxy col = b.emit1(OpId::Where, {op(binary(b, OpId::Ge, inside, static_cast<double>(v))), Operand::lit(0), op(inside)});
  s.mine = binary(b, OpId::Eq, local, col);
  s.at = binary(b, OpId::Add, binary(b, OpId::Mul, iota(n), static_cast<double>(v)), col);
  return s;
}

// Per row over the slice's real classes, lse = m + log(sum(exp(z - m))) with
// m their max (0 when the slice has none, so that lse is -inf, not NaN);
// the target's logit where the slice holds it, else 0.
std::vector<Proxy> decompose_linear_cross_entropy_stats(TraceBuilder& b, const BoundSymbol& c) {
  const SliceHead s = slice_head(b, c);
  const Shape& nv = s.logits.type.shape;
  const double inf = std::numeric_limits<double>::infinity();
  Proxy z = b.emit1(OpId::Where, {op(s.valid), op(s.logits), Operand::lit(-inf)});
  Proxy m = reduce(b, OpId::Amax, z, {1});
  m = b.emit1(OpId::Where, {op(binary(b, OpId::Eq, m, -inf)), Operand::lit(0), op(m)});
  Proxy e = unary(b, OpId::Exp, binary(b, OpId::Sub, z, broadcast(b, m, nv, {0})));
  Proxy lse = binary(b, OpId::Add, m, unary(b, OpId::Log, reduce(b, OpId::Sum, e, {1})));
  Proxy picked = b.emit1(OpId::Take, {op(reshape(b, s.logits, {nv[0] * nv[1]})), op(s.at)}, Attrs{{"dim", int64_t{0}}});
  Proxy target = b.emit1(OpId::Where, {op(s.mine), op(picked), Operand::lit(0)});
  const Shape& rows = input(b, c, 2).type.shape;
  return {reshape(b, lse, rows), reshape(b, target, rows)};
}

// The VJP of the above for cotangents dlse and dtarget: per logit
// dlse * exp(z - lse) over the real classes (the slice's softmax), plus
// dtarget at the target where the slice holds it; then linear's rule.
std::vector<Proxy> decompose_linear_cross_entropy_stats_grad(TraceBuilder& b, const BoundSymbol& c) {
  const SliceHead s = slice_head(b, c);
  const Shape& nv = s.logits.type.shape;
  auto row = [&](size_t i) { return broadcast(b, reshape(b, input(b, c, i), {nv[0]}), nv, {0}); };
  Proxy p = unary(b, OpId::Exp, binary(b, OpId::Sub, s.logits, row(4)));
  // where, not a product with the mask: exp(z - lse) is inf for a padded
  // class of a slice with no real ones (lse -inf).
  Proxy d = b.emit1(OpId::Where, {op(s.valid), op(binary(b, OpId::Mul, p, row(5))), Operand::lit(0)});
  Proxy at_target = b.emit1(OpId::Where, {op(s.mine), op(reshape(b, input(b, c, 6), {nv[0]})), Operand::lit(0)});
  d = reshape(b, b.emit1(OpId::IndexAdd, {op(reshape(b, d, {nv[0] * nv[1]})), op(s.at), op(at_target)},
                         Attrs{{"dim", int64_t{0}}}),
              nv);
  return head_gradients(b, c, s.h, d);
}

}  // namespace

std::vector<Proxy> decompose(TraceBuilder& b, const BoundSymbol& composite) {
  switch (composite.op) {
    case OpId::Linear: return {decompose_linear(b, composite)};
    case OpId::Gelu: return {decompose_gelu(b, composite)};
    case OpId::Softmax: return {decompose_softmax(b, composite)};
    case OpId::LayerNorm: return {decompose_layer_norm(b, composite)};
    case OpId::ScaledDotProductAttention: return {decompose_sdpa(b, composite)};
    case OpId::CrossEntropy: return {decompose_cross_entropy(b, composite)};
    case OpId::Silu: return {decompose_silu(b, composite)};
    case OpId::RmsNorm: return {decompose_rms_norm(b, composite)};
    case OpId::LinearCrossEntropy: return {decompose_linear_cross_entropy(b, composite)};
    case OpId::LinearCrossEntropyGrad: return decompose_linear_cross_entropy_grad(b, composite);
    case OpId::LinearCrossEntropyWithGrad: return decompose_linear_cross_entropy_with_grad(b, composite);
    case OpId::LinearCrossEntropyStats: return decompose_linear_cross_entropy_stats(b, composite);
    case OpId::LinearCrossEntropyStatsGrad: return decompose_linear_cross_entropy_stats_grad(b, composite);
    case OpId::ScaledDotProductAttentionGrad: return decompose_sdpa_grad(b, composite);
    // prims, and fusion (a region's statements are already prims): the check below
    FSDPC_CASES_EXCEPT_COMPOSITE
      break;
  }
  FSDPC_CHECK(false) << op_name(composite.op) << " is not a composite with a decomposition";
  __builtin_unreachable();
}

}  // namespace fsdpc
