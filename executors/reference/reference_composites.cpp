// Direct float64 implementations of the composites, for traces that carry a
// composite without its decomposition (parsed from JSON, or built with
// record_decompositions off). Each follows ir/decompositions.cpp step by step
// so the two agree to rounding.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "executors/reference/reference_internal.h"

namespace fsdpc::reference {

namespace {

int64_t rows_of(const Shape& s) {
  int64_t r = 1;
  for (size_t i = 0; i + 1 < s.size(); ++i) r *= s[i];
  return r;
}

Data linear(const std::vector<Input>& in, const TensorType& out) {
  const Value& x = *in[0].value;
  const Value& w = *in[1].value;
  const int64_t n_in = w.type.shape[1], n_out = w.type.shape[0];
  const int64_t rows = rows_of(x.type.shape);
  Data d(numel(out.shape));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < n_out; ++o) {
      double acc = 0.0;
      for (int64_t i = 0; i < n_in; ++i) acc += x.data[r * n_in + i] * w.data[o * n_in + i];
      d[r * n_out + o] = in.size() == 3 ? acc + in[2].value->data[o] : acc;
    }
  return d;
}

// PyTorch's gelu(approximate='tanh').
Data gelu(const Value& x) {
  const double beta = std::sqrt(2.0 / std::numbers::pi);
  constexpr double kKappa = 0.044715;
  Data d(x.data.size());
  for (size_t i = 0; i < d.size(); ++i) {
    const double v = x.data[i];
    d[i] = 0.5 * v * (1.0 + std::tanh(beta * (v + kKappa * v * v * v)));
  }
  return d;
}

// Stable softmax of n elements spaced `stride` apart, in place.
void softmax_line(double* p, int64_t n, int64_t stride) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n; ++j) m = std::max(m, p[j * stride]);
  double s = 0.0;
  for (int64_t j = 0; j < n; ++j) s += (p[j * stride] = std::exp(p[j * stride] - m));
  for (int64_t j = 0; j < n; ++j) p[j * stride] /= s;
}

Data softmax(const BoundSymbol& b, const Value& x) {
  const int64_t dim = b.attrs.get_int("dim");
  const Shape& s = x.type.shape;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < dim; ++i) outer *= s[i];
  for (size_t i = dim + 1; i < s.size(); ++i) inner *= s[i];
  Data d = x.data;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) softmax_line(d.data() + o * s[dim] * inner + i, s[dim], inner);
  return d;
}

// Mean and biased variance over the last dim; eps inside the rsqrt.
Data layer_norm(const BoundSymbol& b, const std::vector<Input>& in) {
  const Value& x = *in[0].value;
  const Data& w = in[1].value->data;
  const Data& bias = in[2].value->data;
  const double eps = b.attrs.get_double("eps");
  const int64_t c = x.type.shape.back(), rows = rows_of(x.type.shape);
  Data d(x.data.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.data.data() + r * c;
    double mean = 0.0, var = 0.0;
    for (int64_t j = 0; j < c; ++j) mean += xr[j];
    mean /= static_cast<double>(c);
    for (int64_t j = 0; j < c; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    var /= static_cast<double>(c);
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < c; ++j) d[r * c + j] = (xr[j] - mean) * rstd * w[j] + bias[j];
  }
  return d;
}

// x / (1 + exp(-x)), as the decomposition writes x * sigmoid(x).
Data silu(const Value& x) {
  Data d(x.data.size());
  for (size_t i = 0; i < d.size(); ++i) d[i] = x.data[i] / (std::exp(-x.data[i]) + 1.0);
  return d;
}

// w * x * rsqrt(mean(x^2) + eps) over the last dim (float64 throughout:
// the f32 upcast of f16/bf16 inputs is exact here).
Data rms_norm(const BoundSymbol& b, const std::vector<Input>& in) {
  const Value& x = *in[0].value;
  const Data& w = in[1].value->data;
  const double eps = b.attrs.get_double("eps");
  const int64_t c = x.type.shape.back(), rows = rows_of(x.type.shape);
  Data d(x.data.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.data.data() + r * c;
    double ms = 0.0;
    for (int64_t j = 0; j < c; ++j) ms += xr[j] * xr[j];
    const double rstd = 1.0 / std::sqrt(ms / static_cast<double>(c) + eps);
    for (int64_t j = 0; j < c; ++j) d[r * c + j] = w[j] * (xr[j] * rstd);
  }
  return d;
}

// Query i of batch entry n: its probabilities over the tk keys, softmax of
// q_i·k_j·scale with key j > i masked when causal (top-left aligned, as
// PyTorch's tril mask), into p.
void attention_probs(const Value& q, const Value& k, int64_t n, int64_t i, int64_t tq, int64_t tk, int64_t dh,
                     double scale, bool causal, double* p) {
  const double* qi = q.data.data() + (n * tq + i) * dh;
  for (int64_t j = 0; j < tk; ++j) {
    const double* kj = k.data.data() + (n * tk + j) * dh;
    double acc = 0.0;
    for (int64_t e = 0; e < dh; ++e) acc += qi[e] * kj[e];
    p[j] = causal && j > i ? -std::numeric_limits<double>::infinity() : acc * scale;
  }
  softmax_line(p, tk, 1);
}

// softmax(q·kᵀ·scale, masked causally) · v, one [Tq, Tk] score matrix per batch.
Data sdpa(const BoundSymbol& b, const std::vector<Input>& in, const TensorType& out) {
  const Value& q = *in[0].value;
  const Value& k = *in[1].value;
  const Value& v = *in[2].value;
  const size_t r = q.type.shape.size();
  const int64_t tq = q.type.shape[r - 2], dh = q.type.shape[r - 1];
  const int64_t tk = k.type.shape[r - 2], dv = v.type.shape[r - 1];
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < r; ++i) batch *= q.type.shape[i];
  const double scale = b.attrs.get_double_or("scale", 1.0 / std::sqrt(static_cast<double>(dh)));
  const bool causal = b.attrs.get_bool_or("is_causal", false);
  Data d(numel(out.shape), 0.0);
  Data scores(tk);
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < tq; ++i) {
      attention_probs(q, k, p, i, tq, tk, dh, scale, causal, scores.data());
      double* oi = d.data() + (p * tq + i) * dv;
      for (int64_t j = 0; j < tk; ++j)
        for (int64_t e = 0; e < dv; ++e) oi[e] += scores[j] * v.data[(p * tk + j) * dv + e];
    }
  return d;
}

// Attention's gradients for the output's cotangent g, row by row: p as
// attention_probs() gives it, then gv += pᵀ g, dp = g vᵀ, ds = p (dp -
// rowsum(dp p)) scale, gq = ds k, gk += dsᵀ q.
std::vector<Data> sdpa_grad(const BoundSymbol& b, const std::vector<Input>& in) {
  const Value& q = *in[0].value;
  const Value& k = *in[1].value;
  const Value& v = *in[2].value;
  const Value& g = *in[3].value;
  const size_t r = q.type.shape.size();
  const int64_t tq = q.type.shape[r - 2], dh = q.type.shape[r - 1];
  const int64_t tk = k.type.shape[r - 2], dv = v.type.shape[r - 1];
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < r; ++i) batch *= q.type.shape[i];
  const double scale = b.attrs.get_double("scale");
  const bool causal = b.attrs.get_bool_or("is_causal", false);
  Data gq(q.data.size(), 0.0), gk(k.data.size(), 0.0), gv(v.data.size(), 0.0), p(tk), dp(tk);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t i = 0; i < tq; ++i) {
      const double* qi = q.data.data() + (n * tq + i) * dh;
      const double* gi = g.data.data() + (n * tq + i) * dv;
      attention_probs(q, k, n, i, tq, tk, dh, scale, causal, p.data());
      double dot = 0.0;
      for (int64_t j = 0; j < tk; ++j) {
        const double* vj = v.data.data() + (n * tk + j) * dv;
        double acc = 0.0;
        for (int64_t e = 0; e < dv; ++e) {
          acc += gi[e] * vj[e];
          gv[(n * tk + j) * dv + e] += p[j] * gi[e];
        }
        dp[j] = acc;
        dot += acc * p[j];
      }
      for (int64_t j = 0; j < tk; ++j) {
        const double ds = p[j] * (dp[j] - dot) * scale;
        const double* kj = k.data.data() + (n * tk + j) * dh;
        for (int64_t e = 0; e < dh; ++e) {
          gq[(n * tq + i) * dh + e] += ds * kj[e];
          gk[(n * tk + j) * dh + e] += ds * qi[e];
        }
      }
    }
  return {std::move(gq), std::move(gk), std::move(gv)};
}

// Mean over all positions of -log_softmax(logits)[target].
Data cross_entropy(const std::vector<Input>& in) {
  const Value& logits = *in[0].value;
  const Value& targets = *in[1].value;
  const int64_t v = logits.type.shape.back(), n = rows_of(logits.type.shape);
  double picked = 0.0;
  for (int64_t r = 0; r < n; ++r) {
    const double* z = logits.data.data() + r * v;
    const auto t = static_cast<int64_t>(targets.data[r]);
    if (t < 0 || t >= v)
      fail("cross_entropy: target ", t, " at position ", r, " is out of range for ", v, " classes");
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < v; ++j) m = std::max(m, z[j]);
    double s = 0.0;
    for (int64_t j = 0; j < v; ++j) s += std::exp(z[j] - m);
    picked += (z[t] - m) - std::log(s);
  }
  return Data{-picked / static_cast<double>(n)};
}

// One row's log-softmax over v logits z, into logp (the stable form of
// cross_entropy above).
void log_softmax_row(const double* z, int64_t v, double* logp) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < v; ++j) m = std::max(m, z[j]);
  double s = 0.0;
  for (int64_t j = 0; j < v; ++j) s += std::exp(z[j] - m);
  const double lse = m + std::log(s);
  for (int64_t j = 0; j < v; ++j) logp[j] = z[j] - lse;
}

int64_t checked_target(const Value& targets, int64_t r, int64_t v) {
  const auto t = static_cast<int64_t>(targets.data[r]);
  if (t < 0 || t >= v)
    fail("linear_cross_entropy: target ", t, " at position ", r, " is out of range for ", v, " classes");
  return t;
}

// h [n, C] times w [V, C] transposed, one row of logits at a time: the
// oracle needs no [n, V] buffer either.
void logits_row(const Value& h, const Value& w, int64_t r, double* z) {
  const int64_t c = w.type.shape[1], v = w.type.shape[0];
  for (int64_t j = 0; j < v; ++j) {
    double acc = 0.0;
    for (int64_t i = 0; i < c; ++i) acc += h.data[r * c + i] * w.data[j * c + i];
    z[j] = acc;
  }
}

// Mean over the positions of -log_softmax(h wᵀ)[target].
Data linear_cross_entropy(const std::vector<Input>& in) {
  const Value& h = *in[0].value;
  const Value& w = *in[1].value;
  const int64_t v = w.type.shape[0], n = rows_of(h.type.shape);
  Data z(v), logp(v);
  double picked = 0.0;
  for (int64_t r = 0; r < n; ++r) {
    logits_row(h, w, r, z.data());
    log_softmax_row(z.data(), v, logp.data());
    picked += logp[checked_target(*in[2].value, r, v)];
  }
  return Data{-picked / static_cast<double>(n)};
}

// dlogits = (softmax - onehot) g / n per row; dh = dlogits w, dw = dlogitsᵀ h.
std::vector<Data> linear_cross_entropy_grad(const std::vector<Input>& in) {
  const Value& h = *in[0].value;
  const Value& w = *in[1].value;
  const double g = in[3].value->data.at(0);
  const int64_t v = w.type.shape[0], c = w.type.shape[1], n = rows_of(h.type.shape);
  Data dh(numel(h.type.shape), 0.0), dw(numel(w.type.shape), 0.0), z(v), logp(v);
  for (int64_t r = 0; r < n; ++r) {
    logits_row(h, w, r, z.data());
    log_softmax_row(z.data(), v, logp.data());
    const int64_t t = checked_target(*in[2].value, r, v);
    for (int64_t j = 0; j < v; ++j) {
      const double d = (std::exp(logp[j]) - (j == t ? 1.0 : 0.0)) * g / static_cast<double>(n);
      for (int64_t i = 0; i < c; ++i) {
        dh[r * c + i] += d * w.data[j * c + i];
        dw[j * c + i] += d * h.data[r * c + i];
      }
    }
  }
  return {std::move(dh), std::move(dw)};
}

// One rank's slice of a vocabulary-parallel head (linear_cross_entropy_stats):
// the slice holds classes offset .. offset + V/T - 1, those from `vocab` on
// padding. A row's real classes in the slice: [0, real).
struct Slice {
  int64_t offset, real;
  Slice(const BoundSymbol& b, const std::vector<Input>& in, int64_t v)
      : offset(static_cast<int64_t>(in[3].value->data.at(0))),
        real(std::clamp<int64_t>(b.attrs.get_int("vocab") - offset, 0, v)) {}
  // The target's column in the slice, or -1 where another slice holds it.
  int64_t column(const BoundSymbol& b, const Value& targets, int64_t r, int64_t v) const {
    const int64_t t = checked_target(targets, r, b.attrs.get_int("vocab")) - offset;
    return t >= 0 && t < v ? t : -1;
  }
  // log(sum(exp(z))) over the real classes; -inf without any.
  double lse(const double* z) const {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < real; ++j) m = std::max(m, z[j]);
    if (real == 0) return m;
    double s = 0.0;
    for (int64_t j = 0; j < real; ++j) s += std::exp(z[j] - m);
    return m + std::log(s);
  }
};

std::vector<Data> linear_cross_entropy_stats(const BoundSymbol& b, const std::vector<Input>& in) {
  const Value& h = *in[0].value;
  const Value& w = *in[1].value;
  const int64_t v = w.type.shape[0], n = rows_of(h.type.shape);
  const Slice slice(b, in, v);
  Data z(v), lse(n), target(n, 0.0);
  for (int64_t r = 0; r < n; ++r) {
    logits_row(h, w, r, z.data());
    lse[r] = slice.lse(z.data());
    if (const int64_t t = slice.column(b, *in[2].value, r, v); t >= 0) target[r] = z[t];
  }
  return {std::move(lse), std::move(target)};
}

// dz = dlse * exp(z - lse) over the real classes, + dtarget at the target.
std::vector<Data> linear_cross_entropy_stats_grad(const BoundSymbol& b, const std::vector<Input>& in) {
  const Value& h = *in[0].value;
  const Value& w = *in[1].value;
  const Data &lse = in[4].value->data, &dlse = in[5].value->data, &dtarget = in[6].value->data;
  const int64_t v = w.type.shape[0], c = w.type.shape[1], n = rows_of(h.type.shape);
  const Slice slice(b, in, v);
  Data dh(numel(h.type.shape), 0.0), dw(numel(w.type.shape), 0.0), z(v);
  for (int64_t r = 0; r < n; ++r) {
    logits_row(h, w, r, z.data());
    const int64_t t = slice.column(b, *in[2].value, r, v);
    for (int64_t j = 0; j < v; ++j) {
      double d = j < slice.real ? dlse[r] * std::exp(z[j] - lse[r]) : 0.0;
      if (j == t) d += dtarget[r];
      for (int64_t i = 0; i < c; ++i) {
        dh[r * c + i] += d * w.data[j * c + i];
        dw[j * c + i] += d * h.data[r * c + i];
      }
    }
  }
  return {std::move(dh), std::move(dw)};
}

}  // namespace

std::vector<Data> run_composite(const BoundSymbol& b, const std::vector<Input>& in) {
  const TensorType& out = b.outputs.at(0).type;
  switch (b.op) {
    case OpId::Linear: return {linear(in, out)};
    case OpId::Gelu: return {gelu(*in[0].value)};
    case OpId::Softmax: return {softmax(b, *in[0].value)};
    case OpId::LayerNorm: return {layer_norm(b, in)};
    case OpId::ScaledDotProductAttention: return {sdpa(b, in, out)};
    case OpId::CrossEntropy: return {cross_entropy(in)};
    case OpId::Silu: return {silu(*in[0].value)};
    case OpId::RmsNorm: return {rms_norm(b, in)};
    case OpId::LinearCrossEntropy: return {linear_cross_entropy(in)};
    case OpId::LinearCrossEntropyGrad: return linear_cross_entropy_grad(in);
    case OpId::LinearCrossEntropyWithGrad: {
      std::vector<Data> out = linear_cross_entropy_grad(in);
      out.insert(out.begin(), linear_cross_entropy(in));
      return out;
    }
    case OpId::LinearCrossEntropyStats: return linear_cross_entropy_stats(b, in);
    case OpId::LinearCrossEntropyStatsGrad: return linear_cross_entropy_stats_grad(b, in);
    case OpId::ScaledDotProductAttentionGrad: return sdpa_grad(b, in);
    // not composites it runs: the check below
    FSDPC_CASES_EXCEPT_COMPOSITE
      break;
  }
  FSDPC_CHECK(false) << op_name(b.op) << " is not a composite the reference executor knows";
  return {};
}

}  // namespace fsdpc::reference
