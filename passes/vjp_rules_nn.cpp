// VJP rules of the composites, each its own closed form rather than the
// backward of its decomposition: fewer, larger statements (softmax backward
// is y * (g - sum(g * y))), and no use of decomposition intermediates, which
// are not visible outside the composite. What a rule needs from the forward
// (layer_norm's rstd, attention's probabilities) it recomputes from the
// composite's inputs.
#include <cmath>
#include <numbers>

#include "ir/error.h"
#include "passes/vjp_rules_util.h"

namespace fsdpc::vjp_detail {

namespace {

// Mean over `dim` of x, kept reduced.
Proxy mean(TraceBuilder& b, const Proxy& x, int64_t dim) {
  return binary(b, OpId::Div, sum(b, x, {dim}), static_cast<double>(x.type.shape[dim]));
}

// softmax backward from the probabilities p: p * (g - sum(g * p)).
Proxy softmax_backward(TraceBuilder& b, const Proxy& g, const Proxy& p, int64_t dim) {
  Proxy gp = binary(b, OpId::Mul, g, p);
  Proxy s = broadcast_back(b, sum(b, gp, {dim}), p.type.shape, {dim});
  return binary(b, OpId::Sub, gp, binary(b, OpId::Mul, p, s));
}

Proxy softmax(TraceBuilder& b, const Proxy& x, int64_t dim) {
  return b.emit1(OpId::Softmax, {op(x)}, Attrs{{"dim", dim}});
}

// x [..., in], w [out, in], b [out]: gx = g w, gw = gᵀ x over all rows, gb = sum g.
Cotangents linear_grad(const VjpCall& c) {
  TraceBuilder& b = c.b;
  const Proxy x = c.in(0), w = c.in(1);
  const Proxy& g = c.g();
  const int64_t in = w.type.shape[1], out = w.type.shape[0];
  const int64_t rows = numel(x.type.shape) / in;
  Cotangents r = c.none();
  if (c.need(0)) {
    Proxy g2 = rank(x) == 1 ? reshape(b, g, {1, out}) : g;
    r[0] = reshape(b, matmul(b, g2, w), x.type.shape);
  }
  if (c.need(1)) {
    Proxy gt = permute(b, reshape(b, g, {rows, out}), {1, 0});
    r[1] = matmul(b, gt, reshape(b, x, {rows, in}));
  }
  if (c.arity() == 3 && c.need(2)) r[2] = sum(b, g, range(rank(g) - 1));
  return r;
}

// gelu(approximate=tanh) = x/2 (1 + t), t = tanh(k (x + a x^3)):
// d/dx = (1 + t)/2 + x/2 (1 - t^2) k (1 + 3 a x^2).
Proxy gelu_grad(const VjpCall& c) {
  TraceBuilder& b = c.b;
  const double k = std::sqrt(2.0 / std::numbers::pi);
  constexpr double kA = 0.044715;
  const Proxy x = c.in(0);
  Proxy x2 = binary(b, OpId::Mul, x, x);
  Proxy x3 = binary(b, OpId::Mul, x2, x);
  Proxy inner = binary(b, OpId::Add, x, binary(b, OpId::Mul, x3, kA));
  Proxy t = unary(b, OpId::Tanh, binary(b, OpId::Mul, inner, k));
  Proxy left = binary(b, OpId::Mul, binary(b, OpId::Add, t, 1.0), 0.5);
  Proxy sech2 = binary(b, OpId::Sub, 1.0, binary(b, OpId::Mul, t, t));
  Proxy dinner = binary(b, OpId::Mul, binary(b, OpId::Add, binary(b, OpId::Mul, x2, 3 * kA), 1.0), k);
  Proxy right = binary(b, OpId::Mul, binary(b, OpId::Mul, binary(b, OpId::Mul, x, 0.5), sech2), dinner);
  return binary(b, OpId::Mul, c.g(), binary(b, OpId::Add, left, right));
}

Proxy softmax_grad(const VjpCall& c) {
  return softmax_backward(c.b, c.g(), c.out(), c.bsym.attrs.get_int("dim"));
}

// With xhat = (x - mean) * rstd: gb = sum g, gw = sum g xhat over the rows,
// gx = rstd (gxhat - mean(gxhat) - xhat mean(gxhat xhat)) with gxhat = g w.
Cotangents layer_norm_grad(const VjpCall& c) {
  TraceBuilder& b = c.b;
  const Proxy x = c.in(0);
  const Proxy& g = c.g();
  const Shape& shape = x.type.shape;
  const int64_t last = rank(x) - 1;
  auto back = [&](const Proxy& reduced) { return broadcast_back(b, reduced, shape, {last}); };
  Cotangents r = c.none();
  if (c.need(2)) r[2] = sum(b, g, range(last));
  if (!c.need(0) && !c.need(1)) return r;
  Proxy xc = binary(b, OpId::Sub, x, back(mean(b, x, last)));
  Proxy var = mean(b, binary(b, OpId::Mul, xc, xc), last);
  Proxy rstd = back(unary(b, OpId::Rsqrt, binary(b, OpId::Add, var, c.bsym.attrs.get_double("eps"))));
  Proxy xhat = binary(b, OpId::Mul, xc, rstd);
  if (c.need(1)) r[1] = sum(b, binary(b, OpId::Mul, g, xhat), range(last));
  if (!c.need(0)) return r;
  Proxy gxhat = binary(b, OpId::Mul, g, broadcast(b, c.in(1), shape, {last}));
  Proxy m1 = back(mean(b, gxhat, last));
  Proxy m2 = back(mean(b, binary(b, OpId::Mul, gxhat, xhat), last));
  Proxy centred = binary(b, OpId::Sub, binary(b, OpId::Sub, gxhat, m1), binary(b, OpId::Mul, xhat, m2));
  r[0] = binary(b, OpId::Mul, centred, rstd);
  return r;
}

// silu(x) = x s, s = sigmoid(x) = 1 / (1 + exp(-x)): d/dx = s (1 + x (1 - s)).
Proxy silu_grad(const VjpCall& c) {
  TraceBuilder& b = c.b;
  const Proxy x = c.in(0);
  Proxy s = binary(b, OpId::Div, 1.0, binary(b, OpId::Add, unary(b, OpId::Exp, unary(b, OpId::Neg, x)), 1.0));
  Proxy d = binary(b, OpId::Mul, s, binary(b, OpId::Add, binary(b, OpId::Mul, x, binary(b, OpId::Sub, 1.0, s)), 1.0));
  return binary(b, OpId::Mul, c.g(), d);
}

// x narrower than f32 as f32 (rms_norm's statistics are f32 there, as in
// Hugging Face), else as it is.
Proxy widened(TraceBuilder& b, const Proxy& x) {
  return dtype_size(x.type.dtype) < 4 ? convert(b, x, DType::f32) : x;
}

// y = w xhat, xhat = x rstd, rstd = (mean(x^2) + eps)^(-1/2): gw = sum g xhat
// over the rows, gx = rstd (gxhat - xhat mean(gxhat xhat)) with gxhat = g w.
// Computed in f32 for f16/bf16 inputs, the results cast back.
Cotangents rms_norm_grad(const VjpCall& c) {
  TraceBuilder& b = c.b;
  Cotangents r = c.none();
  if (!c.need(0) && !c.need(1)) return r;
  const DType dt = c.in(0).type.dtype;
  const Proxy x = widened(b, c.in(0));
  const Proxy g = widened(b, c.g());
  const Shape& shape = x.type.shape;
  const int64_t last = rank(x) - 1;
  auto back = [&](const Proxy& reduced) { return broadcast_back(b, reduced, shape, {last}); };
  auto narrowed = [&](const Proxy& v) { return v.type.dtype == dt ? v : convert(b, v, dt); };
  Proxy ms = mean(b, binary(b, OpId::Mul, x, x), last);
  Proxy rstd = back(unary(b, OpId::Rsqrt, binary(b, OpId::Add, ms, c.bsym.attrs.get_double("eps"))));
  Proxy xhat = binary(b, OpId::Mul, x, rstd);
  if (c.need(1)) r[1] = narrowed(sum(b, binary(b, OpId::Mul, g, xhat), range(last)));
  if (!c.need(0)) return r;
  Proxy gxhat = binary(b, OpId::Mul, g, broadcast(b, widened(b, c.in(1)), shape, {last}));
  Proxy m = back(mean(b, binary(b, OpId::Mul, gxhat, xhat), last));
  r[0] = narrowed(binary(b, OpId::Mul, binary(b, OpId::Sub, gxhat, binary(b, OpId::Mul, xhat, m)), rstd));
  return r;
}

// Attention's three gradients in one statement,
// scaled_dot_product_attention_grad, which recomputes the probabilities from
// q and k (the forward saves q, k and v, never a [Tq, Tk] value): its CPU
// kernel holds one block of query rows at a time, and executors without
// one run its decomposition (ir/decompositions.cpp), the f32-between-bf16
// products rule included. Gradients not needed are computed anyway and left
// unused (q, k and v come from one projection in every model here).
Cotangents sdpa_grad(const VjpCall& c) {
  Cotangents r = c.none();
  if (!c.need(0) && !c.need(1) && !c.need(2)) return r;
  Attrs attrs;
  attrs.set("is_causal", c.bsym.attrs.get_bool_or("is_causal", false));
  attrs.set("scale", c.bsym.attrs.get_double("scale"));
  std::vector<Proxy> grads = c.b.emit(OpId::ScaledDotProductAttentionGrad,
                                      {op(c.in(0)), op(c.in(1)), op(c.in(2)), op(c.g())}, std::move(attrs));
  for (size_t i = 0; i < 3; ++i)
    if (c.need(i)) r[i] = grads[i];
  return r;
}

// mean over n rows of -log_softmax(logits)[target]: (softmax - onehot) * g / n.
// The one-hot is never built: 1 is subtracted at each row's target by an
// index_add into the flattened softmax (flat index row * v + target), which
// gives the same bits as p - onehot. Comparing an iota against the targets
// instead materialises two [n, v] i64 broadcasts and a bool and an f32 mask
// when unfused: for GPT-2's 50257-word vocabulary at 2x1024 tokens, 2.2 GB
// beside the 0.4 GB of logits, the backward's peak.
Proxy cross_entropy_grad(const VjpCall& c) {
  TraceBuilder& b = c.b;
  const Proxy logits = c.in(0), targets = c.in(1);
  const int64_t v = logits.type.shape.back();
  const int64_t n = numel(logits.type.shape) / v;
  Proxy p = softmax(b, reshape(b, logits, {n, v}), 1);
  Proxy rows = b.emit1(OpId::Iota, {},
                       Attrs{{"length", n},
                             {"dtype", std::string(dtype_name(targets.type.dtype))},
                             {"device", device_name(logits.type.device)}});
  Proxy at = binary(b, OpId::Add, binary(b, OpId::Mul, rows, static_cast<double>(v)), reshape(b, targets, {n}));
  Proxy minus_one = b.emit1(OpId::Full, {},
                            Attrs{{"shape", IntList{n}},
                                  {"value", -1.0},
                                  {"dtype", std::string(dtype_name(logits.type.dtype))},
                                  {"device", device_name(logits.type.device)}});
  Proxy diff = reshape(
      b, b.emit1(OpId::IndexAdd, {op(reshape(b, p, {n * v})), op(at), op(minus_one)}, Attrs{{"dim", int64_t{0}}}),
      {n, v});
  // The scale's broadcast right before its multiply, so a fusion region takes both.
  Proxy per_row = binary(b, OpId::Div, c.g(), static_cast<double>(n));
  Proxy scale = broadcast(b, per_row, {n, v}, {});
  return reshape(b, binary(b, OpId::Mul, diff, scale), logits.type.shape);
}

// The fused head's gradients in one statement, linear_cross_entropy_grad,
// which recomputes each chunk of logits from h and w (its kernel holds one
// [chunk, V] block at a time) rather than reading logits saved by the
// forward: the forward then saves h, w and the targets only, as linear
// alone would, and no [tokens, V] value exists on either side of split.
// Both gradients come from one pass over the chunks; one not needed is
// computed anyway and left unused (the head's weight is a parameter, and
// its input always needs its gradient).
Cotangents linear_cross_entropy_grad(const VjpCall& c) {
  Cotangents r = c.none();
  if (!c.need(0) && !c.need(1)) return r;
  Attrs attrs;
  if (const AttrValue* chunk = c.bsym.attrs.find("chunk")) attrs.set("chunk", *chunk);
  std::vector<Proxy> grads = c.b.emit(OpId::LinearCrossEntropyGrad, {op(c.in(0)), op(c.in(1)), op(c.in(2)), op(c.g())},
                                      std::move(attrs));
  if (c.need(0)) r[0] = grads[0];
  if (c.need(1)) r[1] = grads[1];
  return r;
}

// One vocabulary slice's statistics (passes/tensor_parallel_vocab.cpp): the
// gradients of both outputs in one statement, which recomputes the slice's
// logits chunk by chunk as linear_cross_entropy_grad does and takes lse,
// the forward's first output, so that exp(z - lse) needs no second pass
// over the logits for their max. This is the op's own VJP for any
// cotangents, not only the loss's: dh is this rank's part (the trace's f
// sums the parts over tp). An output without a cotangent gets zeros.
Cotangents linear_cross_entropy_stats_grad(const VjpCall& c) {
  Cotangents r = c.none();
  if (!c.need(0) && !c.need(1)) return r;
  auto cotangent = [&](size_t i) {
    return c.out_cts[i] ? *c.out_cts[i] : zeros(c.b, c.bsym.outputs[i].type);
  };
  Attrs attrs{{"vocab", c.bsym.attrs.get_int("vocab")}};
  if (const AttrValue* chunk = c.bsym.attrs.find("chunk")) attrs.set("chunk", *chunk);
  std::vector<Proxy> grads =
      c.b.emit(OpId::LinearCrossEntropyStatsGrad,
               {op(c.in(0)), op(c.in(1)), op(c.in(2)), op(c.in(3)), op(c.bsym.outputs[0]), op(cotangent(0)),
                op(cotangent(1))},
               std::move(attrs));
  if (c.need(0)) r[0] = grads[0];
  if (c.need(1)) r[1] = grads[1];
  return r;
}

}  // namespace

Cotangents vjp_nn(const VjpCall& c) {
  switch (c.bsym.op) {
    case OpId::Linear: return linear_grad(c);
    case OpId::Gelu: return {gelu_grad(c)};
    case OpId::Softmax: return {softmax_grad(c)};
    case OpId::LayerNorm: return layer_norm_grad(c);
    case OpId::Silu: return {silu_grad(c)};
    case OpId::RmsNorm: return rms_norm_grad(c);
    case OpId::ScaledDotProductAttention: return sdpa_grad(c);
    case OpId::CrossEntropy:
      if (!c.need(0)) return c.none();
      return {cross_entropy_grad(c), std::nullopt};
    case OpId::LinearCrossEntropy: return linear_cross_entropy_grad(c);
    case OpId::LinearCrossEntropyStats: return linear_cross_entropy_stats_grad(c);
    case OpId::LinearCrossEntropyGrad:
    case OpId::LinearCrossEntropyWithGrad:
    case OpId::LinearCrossEntropyStatsGrad:
    case OpId::ScaledDotProductAttentionGrad:
      fail(op_name(c.bsym.op), " has no VJP rule: fsdpc takes first derivatives only");
    // not composites with a rule here: the check below
    FSDPC_CASES_EXCEPT_COMPOSITE
      break;
  }
  FSDPC_CHECK(false) << op_name(c.bsym.op) << " is a composite without a VJP rule";
  return c.none();
}

}  // namespace fsdpc::vjp_detail
