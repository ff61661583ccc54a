// Meta functions of matmul, the creation ops and the composites (docs/ir.md
// "Matmul", "Creation", "Composites"). A composite's type rule is checked
// here once, so its decomposition never sees inputs it cannot handle.
#include "ir/meta_rules.h"

namespace fsdpc::meta {

namespace {

void require_rank_at_least(const MetaArgs& a, const TensorType& t, std::string_view what,
                           size_t rank, std::string_view layout) {
  if (t.shape.size() < rank)
    a.fail(what, " is ", desc(t), "; expected rank >= ", rank, " (", layout, ")");
}

// The vector a layer_norm weight or linear bias must be: [n], x's dtype.
void require_vector(const MetaArgs& a, const TensorType& t, std::string_view what, int64_t n,
                    std::string_view why, const TensorType& x) {
  if (t.shape != Shape{n})
    a.fail(what, " is ", desc(t), "; expected [", n, "] (", why, ")");
  require_same_dtype(a, x, "x", t, what);
}

// Leading dims of t without its last `keep` dims.
Shape batch_of(const TensorType& t, size_t keep) {
  return Shape(t.shape.begin(), t.shape.end() - static_cast<std::ptrdiff_t>(keep));
}

}  // namespace

TensorType meta_matmul(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  const TensorType& y = a.tensor(1);
  require_float(a, x, "a");
  require_float(a, y, "b");
  require_same_dtype(a, x, "a", y, "b");
  require_rank_at_least(a, x, "a", 2, "[..., M, K]");
  require_rank_at_least(a, y, "b", 2, "[..., K, N] or [K, N]");
  const size_t rx = x.shape.size(), ry = y.shape.size();
  if (x.shape[rx - 1] != y.shape[ry - 2])
    a.fail("inner dimensions differ: a is ", desc(x), ", b is ", desc(y),
           " (a.shape[-1] must equal b.shape[-2])");
  if (ry != 2 && batch_of(x, 2) != batch_of(y, 2))
    a.fail("batch dimensions differ: a is ", desc(x), ", b is ", desc(y),
           " (b must be [K, N] or have a's batch dimensions)");
  Shape out = batch_of(x, 1);
  out.push_back(y.shape[ry - 1]);
  // out_dtype (XLA's preferred_element_type): a bf16 or f16 product written
  // straight from its f32 accumulator, never rounded to the narrow type.
  DType out_dtype = x.dtype;
  if (a.has("out_dtype")) {
    out_dtype = a.get_dtype("out_dtype");
    if (out_dtype != x.dtype && out_dtype != DType::f32)
      a.fail("out_dtype ", dtype_name(out_dtype), " for ", desc(x), " operands; expected ", dtype_name(x.dtype),
             " or f32 (the accumulator's dtype)");
  }
  return compute_out(x, std::move(out), out_dtype);
}

TensorType meta_full(const MetaArgs& a) {
  TensorType t;
  t.shape = shape_attr(a, "shape");
  a.get_double("value");  // required, though it does not change the type
  t.dtype = a.get_dtype("dtype");
  t.device = device_attr(a);
  return t;
}

TensorType meta_iota(const MetaArgs& a) {
  TensorType t;
  t.shape = {nonneg_attr(a, "length")};
  t.dtype = a.get_dtype("dtype");
  t.device = device_attr(a);
  return t;
}

// This rank's position in its `group` of `size` ranks, an i64 scalar: the
// one value that differs between the ranks of an SPMD trace (tensor
// parallelism's vocabulary offset). Only executors that know the process
// groups claim it.
TensorType meta_axis_index(const MetaArgs& a) {
  if (a.get_str("group").empty()) a.fail("group is empty; expected a process-group name");
  if (a.get_int("size") < 1) a.fail("size ", a.get_int("size"), " must be >= 1");
  TensorType t;
  t.dtype = DType::i64;
  t.device = device_attr(a);
  return t;
}

TensorType meta_linear(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  const TensorType& w = a.tensor(1);
  require_float(a, x, "x");
  require_same_dtype(a, x, "x", w, "w");
  require_rank_at_least(a, x, "x", 1, "[..., in]");
  if (w.shape.size() != 2) a.fail("w is ", desc(w), "; expected rank 2 ([out, in])");
  if (x.shape.back() != w.shape[1])
    a.fail("in features differ: x is ", desc(x), ", w is ", desc(w),
           " (x.shape[-1] must equal w.shape[1])");
  if (a.size() == 3) require_vector(a, a.tensor(2), "b", w.shape[0], "w's out features", x);
  Shape out = batch_of(x, 1);
  out.push_back(w.shape[0]);
  return compute_out(x, std::move(out), x.dtype);
}

TensorType meta_gelu(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  require_float(a, x, "x");
  const std::string& approx = a.get_str("approximate");
  if (approx != "tanh") a.fail("approximate '", approx, "' is not supported (expected tanh)");
  return compute_out(x, x.shape, x.dtype);
}

TensorType meta_softmax(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  require_float(a, x, "x");
  dim_attr(a, "dim", x.shape.size());
  return compute_out(x, x.shape, x.dtype);
}

TensorType meta_layer_norm(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  require_float(a, x, "x");
  require_rank_at_least(a, x, "x", 1, "[..., C]");
  require_vector(a, a.tensor(1), "w", x.shape.back(), "x's last dim", x);
  require_vector(a, a.tensor(2), "b", x.shape.back(), "x's last dim", x);
  a.get_double("eps");
  return compute_out(x, x.shape, x.dtype);
}

TensorType meta_silu(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  require_float(a, x, "x");
  return compute_out(x, x.shape, x.dtype);
}

// Hugging Face's LlamaRMSNorm: x [..., C], weight [C] in x's dtype.
TensorType meta_rms_norm(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  require_float(a, x, "x");
  require_rank_at_least(a, x, "x", 1, "[..., C]");
  require_vector(a, a.tensor(1), "w", x.shape.back(), "x's last dim", x);
  a.get_double("eps");
  return compute_out(x, x.shape, x.dtype);
}

TensorType meta_sdpa(const MetaArgs& a) {
  const TensorType& q = a.tensor(0);
  const TensorType& k = a.tensor(1);
  const TensorType& v = a.tensor(2);
  require_float(a, q, "q");
  require_same_dtype(a, q, "q", k, "k");
  require_same_dtype(a, q, "q", v, "v");
  require_rank_at_least(a, q, "q", 2, "[..., Tq, D]");
  const size_t r = q.shape.size();
  if (k.shape.size() != r || v.shape.size() != r || batch_of(k, 2) != batch_of(q, 2) ||
      batch_of(v, 2) != batch_of(q, 2))
    a.fail("batch dimensions differ: q is ", desc(q), ", k is ", desc(k), ", v is ", desc(v),
           " (expected [..., Tq, D], [..., Tk, D], [..., Tk, Dv] with equal [...])");
  if (q.shape[r - 1] != k.shape[r - 1])
    a.fail("head sizes differ: q is ", desc(q), ", k is ", desc(k),
           " (q.shape[-1] must equal k.shape[-1])");
  if (k.shape[r - 2] != v.shape[r - 2])
    a.fail("key lengths differ: k is ", desc(k), ", v is ", desc(v),
           " (k.shape[-2] must equal v.shape[-2])");
  a.get_bool("is_causal");
  a.get_double("scale");
  Shape out = batch_of(q, 1);
  out.push_back(v.shape[r - 1]);
  return compute_out(q, std::move(out), q.dtype);
}

TensorType meta_cross_entropy(const MetaArgs& a) {
  const TensorType& logits = a.tensor(0);
  const TensorType& targets = a.tensor(1);
  require_float(a, logits, "logits");
  require_rank_at_least(a, logits, "logits", 1, "[..., V]");
  require_index(a, targets, "targets");
  if (targets.shape != batch_of(logits, 1))
    a.fail("targets is ", desc(targets), ", logits is ", desc(logits), "; expected targets ",
           shape_str(batch_of(logits, 1)), " (logits.shape[:-1])");
  return compute_out(logits, {}, logits.dtype);
}

// The head's operands h [..., C], w [V, C] (linear's weight layout) and
// targets [...], and `chunk` (optional): rows of logits a kernel holds at
// once; it tiles the work and never changes the value.
void check_head_operands(const MetaArgs& a) {
  const TensorType& h = a.tensor(0);
  const TensorType& w = a.tensor(1);
  const TensorType& targets = a.tensor(2);
  require_float(a, h, "h");
  require_same_dtype(a, h, "h", w, "w");
  require_rank_at_least(a, h, "h", 1, "[..., C]");
  if (w.shape.size() != 2) a.fail("w is ", desc(w), "; expected rank 2 ([V, C])");
  if (h.shape.back() != w.shape[1])
    a.fail("features differ: h is ", desc(h), ", w is ", desc(w), " (h.shape[-1] must equal w.shape[1])");
  require_index(a, targets, "targets");
  if (targets.shape != batch_of(h, 1))
    a.fail("targets is ", desc(targets), ", h is ", desc(h), "; expected targets ", shape_str(batch_of(h, 1)),
           " (h.shape[:-1])");
  if (a.has("chunk") && a.get_int("chunk") < 1) a.fail("chunk ", a.get_int("chunk"), " must be >= 1 (rows)");
}

// dh of h's type, dw of w's or dw_dtype's: f32 for bf16 operands writes dw
// from its f32 accumulator (passes/widen_accumulation.h), as matmul's
// out_dtype does.
Types head_gradients(const MetaArgs& a) {
  const TensorType& h = a.tensor(0);
  const TensorType& w = a.tensor(1);
  DType dw = w.dtype;
  if (a.has("dw_dtype")) {
    dw = a.get_dtype("dw_dtype");
    if (dw != w.dtype && dw != DType::f32)
      a.fail("dw_dtype ", dtype_name(dw), " for w ", desc(w), "; expected ", dtype_name(w.dtype), " or f32");
  }
  return {compute_out(h, h.shape, h.dtype), compute_out(h, w.shape, dw)};
}

// The mean over the positions of cross_entropy(linear(h, w), targets), in
// linear_cross_entropy_loss_dtype(h).
TensorType meta_linear_cross_entropy(const MetaArgs& a) {
  check_head_operands(a);
  const TensorType& h = a.tensor(0);
  return compute_out(h, {}, linear_cross_entropy_loss_dtype(h.dtype));
}

// linear_cross_entropy's gradients for its loss's cotangent g (a scalar of
// the loss's dtype).
Types meta_linear_cross_entropy_grad(const MetaArgs& a) {
  const TensorType loss = meta_linear_cross_entropy(a);
  const TensorType& g = a.tensor(3);
  if (!g.shape.empty() || g.dtype != loss.dtype)
    a.fail("g is ", desc(g), "; expected a ", dtype_name(loss.dtype), " scalar (the loss's cotangent)");
  return head_gradients(a);
}

// The loss and its gradients for the cotangent g in one statement:
// linear_cross_entropy's output, then linear_cross_entropy_grad's.
Types meta_linear_cross_entropy_with_grad(const MetaArgs& a) {
  Types out = meta_linear_cross_entropy_grad(a);
  out.insert(out.begin(), meta_linear_cross_entropy(a));
  return out;
}

// One rank's slice of a vocabulary-parallel head: w [V/T, C] holds the
// classes offset .. offset + V/T - 1 (`offset` an integer scalar), those
// from `vocab` on padding. Per position, in the loss's dtype, the log of
// the sum of exp over the slice's logits and the target's logit where the
// slice holds the target (else 0).
Types meta_linear_cross_entropy_stats(const MetaArgs& a) {
  check_head_operands(a);
  const TensorType& h = a.tensor(0);
  const TensorType& offset = a.tensor(3);
  require_index(a, offset, "offset");
  if (!offset.shape.empty()) a.fail("offset is ", desc(offset), "; expected a scalar (the slice's first class)");
  if (a.get_int("vocab") < 1) a.fail("vocab ", a.get_int("vocab"), " must be >= 1 (the classes of the whole head)");
  const TensorType row = compute_out(h, a.tensor(2).shape, linear_cross_entropy_loss_dtype(h.dtype));
  return {row, row};
}

// Its gradients for the cotangents of both outputs (inputs 5 and 6), given
// its first output (input 4, saved by the forward).
Types meta_linear_cross_entropy_stats_grad(const MetaArgs& a) {
  const TensorType row = meta_linear_cross_entropy_stats(a).at(0);
  const char* names[] = {"lse", "its cotangent", "the target logit's cotangent"};
  for (size_t i = 4; i < 7; ++i) {
    const TensorType& t = a.tensor(i);
    if (t.shape != row.shape || t.dtype != row.dtype)
      a.fail("input ", i + 1, " (", names[i - 4], ") is ", desc(t), "; expected ", desc(row));
  }
  return head_gradients(a);
}

// scaled_dot_product_attention's gradients for its output's cotangent g
// ([..., Tq, Dv], the output's type): dq, dk, dv of q's, k's and v's types.
Types meta_sdpa_grad(const MetaArgs& a) {
  const TensorType out = meta_sdpa(a);
  const TensorType& g = a.tensor(3);
  if (g.shape != out.shape || g.dtype != out.dtype)
    a.fail("g is ", desc(g), "; expected ", dtype_name(out.dtype), shape_str(out.shape),
           " (the attention output's cotangent)");
  const TensorType& q = a.tensor(0);
  return {compute_out(q, q.shape, q.dtype), compute_out(q, a.tensor(1).shape, q.dtype),
          compute_out(q, a.tensor(2).shape, q.dtype)};
}

Types meta_composite(const MetaArgs& a) {
  switch (a.op()) {
    case OpId::Linear: return {meta_linear(a)};
    case OpId::Gelu: return {meta_gelu(a)};
    case OpId::Softmax: return {meta_softmax(a)};
    case OpId::LayerNorm: return {meta_layer_norm(a)};
    case OpId::ScaledDotProductAttention: return {meta_sdpa(a)};
    case OpId::CrossEntropy: return {meta_cross_entropy(a)};
    case OpId::Silu: return {meta_silu(a)};
    case OpId::RmsNorm: return {meta_rms_norm(a)};
    case OpId::LinearCrossEntropy: return {meta_linear_cross_entropy(a)};
    case OpId::LinearCrossEntropyGrad: return meta_linear_cross_entropy_grad(a);
    case OpId::LinearCrossEntropyWithGrad: return meta_linear_cross_entropy_with_grad(a);
    case OpId::LinearCrossEntropyStats: return meta_linear_cross_entropy_stats(a);
    case OpId::LinearCrossEntropyStatsGrad: return meta_linear_cross_entropy_stats_grad(a);
    case OpId::ScaledDotProductAttentionGrad: return meta_sdpa_grad(a);
    // not composites: the check below
    FSDPC_CASES_EXCEPT_COMPOSITE
      break;
  }
  FSDPC_CHECK(false) << a.name() << " is not a composite";
  return {};
}

}  // namespace fsdpc::meta
