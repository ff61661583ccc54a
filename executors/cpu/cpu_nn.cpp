// The nn composites, run whole: gelu (oneDNN eltwise gelu_tanh), softmax
// (the max-subtracting "accurate" algorithm: oneDNN's along the last dim,
// loops and oneDNN's exp along any other), layer_norm (a loop with
// double statistics: oneDNN's f32 ones lose 1e-5 when rstd is large) and
// cross_entropy (a stable log-sum-exp in row blocks, its exponentials on
// oneDNN, without a [rows, V] temporary), silu (oneDNN's swish) and rms_norm
// (a loop with double statistics, as layer_norm). The loops split over the rank's
// threads by rows (softmax: by slabs), never inside one row's sum.
#include <algorithm>
#include <cmath>
#include <limits>

#include "executors/cpu/cpu_dnnl.h"
#include "executors/cpu/cpu_kernels.h"

namespace fsdpc::cpu {

namespace {

// Exponentials held at once by cross_entropy: 4 MiB of scratch.
constexpr int64_t kScratchFloats = int64_t{1} << 20;

// Reductions run in eight lanes, so they vectorise (a single accumulator is
// a serial chain: no reassociation without -ffast-math).
constexpr int kLanes = 8;

// One row: mean and biased variance in double (two passes, so a row far
// from zero keeps its variance), and x - mean in double: rstd reaches
// 1/sqrt(eps) on a near-constant row, which would blow an f32 mean's rounding
// up to 1e-5. As fast as oneDNN's with the AVX-512 clone; the loops vectorise.
FSDPC_CPU_CLONES void layer_norm_row(const float* x, const float* w, const float* bias, float* y, int64_t c,
                                     double eps) {
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= c; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] += x[i + j];
  for (; i < c; ++i) lane[0] += x[i];
  double mean = 0.0;
  for (double l : lane) mean += l;
  mean /= static_cast<double>(c);
  double sq[kLanes] = {};
  for (i = 0; i + kLanes <= c; i += kLanes)
    for (int j = 0; j < kLanes; ++j) sq[j] += (x[i + j] - mean) * (x[i + j] - mean);
  for (; i < c; ++i) sq[0] += (x[i] - mean) * (x[i] - mean);
  double var = 0.0;
  for (double l : sq) var += l;
  const double rstd = 1.0 / std::sqrt(var / static_cast<double>(c) + eps);
  for (i = 0; i < c; ++i) y[i] = static_cast<float>((x[i] - mean) * rstd) * w[i] + bias[i];
}

// One row of Hugging Face's LlamaRMSNorm: the mean square in double lanes
// (as layer_norm's statistics), then w * (x * rstd) rounded as the
// decomposition rounds: x * rstd to f32, then the product with w.
FSDPC_CPU_CLONES void rms_norm_row(const float* x, const float* w, float* y, int64_t c, double eps) {
  double sq[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= c; i += kLanes)
    for (int j = 0; j < kLanes; ++j) sq[j] += static_cast<double>(x[i + j]) * x[i + j];
  for (; i < c; ++i) sq[0] += static_cast<double>(x[i]) * x[i];
  double ms = 0.0;
  for (double l : sq) ms += l;
  const double rstd = 1.0 / std::sqrt(ms / static_cast<double>(c) + eps);
  for (i = 0; i < c; ++i) y[i] = w[i] * static_cast<float>(x[i] * rstd);
}

// Softmax along a dim with `inner` > 1 elements after it (oneDNN's is a
// slow reference loop there): per [n, inner] slab, the max of each column,
// x - max, then one oneDNN exp over the whole output, then each column
// divided by its sum (in double). Every loop runs along contiguous inner.
void softmax_strided(const float* x, float* y, int64_t outer, int64_t n, int64_t inner) {
  const int64_t total = outer * n * inner;
  // Slabs split over the rank's threads; each column is one thread's.
  FSDPC_CPU_PARALLEL_FOR(total)
  for (int64_t o = 0; o < outer; ++o) {
    std::vector<float> m(inner);
    const float* xs = x + o * n * inner;
    float* ys = y + o * n * inner;
    std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < inner; ++i) m[i] = xs[j * inner + i] > m[i] ? xs[j * inner + i] : m[i];
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < inner; ++i) ys[j * inner + i] = xs[j * inner + i] - m[i];
  }
  eltwise(dnnl::algorithm::eltwise_exp, 0.0f, 0.0f, y, y, outer * n * inner);
  FSDPC_CPU_PARALLEL_FOR(total)
  for (int64_t o = 0; o < outer; ++o) {
    std::vector<double> s(inner);
    float* ys = y + o * n * inner;
    std::fill(s.begin(), s.end(), 0.0);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < inner; ++i) s[i] += ys[j * inner + i];
    for (int64_t i = 0; i < inner; ++i) s[i] = 1.0 / s[i];
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < inner; ++i) ys[j * inner + i] = static_cast<float>(ys[j * inner + i] * s[i]);
  }
}

}  // namespace

// A NaN is skipped here but still poisons the row through its exponential.
FSDPC_CPU_CLONES float row_max(const float* z, int64_t n) {
  float lane[kLanes];
  for (float& l : lane) l = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] = z[i + j] > lane[j] ? z[i + j] : lane[j];
  for (; i < n; ++i) lane[0] = z[i] > lane[0] ? z[i] : lane[0];
  float m = lane[0];
  for (float l : lane) m = l > m ? l : m;
  return m;
}

FSDPC_CPU_CLONES double row_sum(const float* p, int64_t n) {
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] += p[i + j];
  for (; i < n; ++i) lane[0] += p[i];
  double s = 0.0;
  for (double l : lane) s += l;
  return s;
}

// Targets as int64, each checked against the V classes (the reference's
// message, so both executors tell the user the same thing).
std::vector<int64_t> checked_targets(const BoundSymbol& b, const TensorView& t, int64_t classes) {
  std::vector<int64_t> out(count_of(t));
  const DType d = t.type->dtype;
  if (d != DType::i64 && d != DType::i32)
    fail(op_name(b.op), ": targets have dtype ", dtype_name(d), "; expected i32 or i64");
  for (size_t r = 0; r < out.size(); ++r) {
    out[r] = d == DType::i64 ? cdata<int64_t>(t)[r] : cdata<int32_t>(t)[r];
    if (out[r] < 0 || out[r] >= classes)
      fail(op_name(b.op), ": target ", out[r], " at position ", r, " is out of range for ", classes,
           " classes");
  }
  return out;
}

// Each row's logsumexp(z) - z[target]. With m the row's max, logsumexp =
// m + log(sum exp(z - m)), and that sum is 1 (m's own term, exp(0), exact)
// plus the rest: log1p of the rest keeps a small loss (a confident right
// answer) to f32 precision where log(1 + rest) would lose ~1e-7 absolute.
// Each row's loss is its own: rows split over the rank's threads, and a
// caller sums them in row order, so the total does not depend on their count.
void row_losses(const float* logits, const int64_t* targets, int64_t rows, int64_t v, double* losses) {
  const int64_t block = std::clamp<int64_t>(kScratchFloats / std::max<int64_t>(v, 1), 1, std::max<int64_t>(rows, 1));
  float* e = scratch_floats(block * v, 0);
  std::vector<float> maxes(block);
  for (int64_t r0 = 0; r0 < rows; r0 += block) {
    const int64_t n = std::min(block, rows - r0);
    FSDPC_CPU_PARALLEL_FOR(n * v)
    for (int64_t r = 0; r < n; ++r) {
      const float* z = logits + (r0 + r) * v;
      maxes[r] = row_max(z, v);
      float* er = e + r * v;
      for (int64_t j = 0; j < v; ++j) er[j] = z[j] - maxes[r];
    }
    eltwise(dnnl::algorithm::eltwise_exp, 0.0f, 0.0f, e, e, n * v);
    FSDPC_CPU_PARALLEL_FOR(n * v)
    for (int64_t r = 0; r < n; ++r) {
      const double rest = row_sum(e + r * v, v) - 1.0;
      const double picked = logits[(r0 + r) * v + targets[r0 + r]];
      losses[r0 + r] = std::log1p(rest) + (static_cast<double>(maxes[r]) - picked);
    }
  }
}

namespace {

// Sum over rows of logsumexp(z) - z[target], in row order.
double summed_losses(const float* logits, const std::vector<int64_t>& targets, int64_t rows, int64_t v) {
  std::vector<double> losses(static_cast<size_t>(rows));
  row_losses(logits, targets.data(), rows, v, losses.data());
  double total = 0.0;
  for (double l : losses) total += l;
  return total;
}

}  // namespace

FSDPC_CPU_KERNEL(gelu_kernel) {
  require_f32(b, in[0], "x");
  eltwise(dnnl::algorithm::eltwise_gelu_tanh, 0.0f, 0.0f, cdata<float>(in[0]), mdata<float>(out[0]),
          count_of(out[0]));
}

FSDPC_CPU_KERNEL(softmax_kernel) {
  require_f32(b, in[0], "x");
  const Shape& s = shape_of(in[0]);
  const auto dim = static_cast<size_t>(b.attrs.get_int("dim"));
  const int64_t outer = prod(s, 0, dim), inner = prod(s, dim + 1, s.size());
  if (inner == 1)
    softmax_3d(cdata<float>(in[0]), mdata<float>(out[0]), outer, s[dim], 1, false);
  else
    softmax_strided(cdata<float>(in[0]), mdata<float>(out[0]), outer, s[dim], inner);
}

FSDPC_CPU_KERNEL(layer_norm_kernel) {
  for (size_t i = 0; i < 3; ++i) require_f32(b, in[i], i == 0 ? "x" : i == 1 ? "w" : "b");
  const Shape& s = shape_of(in[0]);
  const int64_t c = s.back(), rows = prod(s, 0, s.size() - 1);
  const double eps = b.attrs.get_double("eps");
  const float* x = cdata<float>(in[0]);
  float* y = mdata<float>(out[0]);
  if (c == 0) return;
  FSDPC_CPU_PARALLEL_FOR(rows * c)
  for (int64_t r = 0; r < rows; ++r)
    layer_norm_row(x + r * c, cdata<float>(in[1]), cdata<float>(in[2]), y + r * c, c, eps);
}

// silu = x * sigmoid(x): oneDNN's swish with alpha 1.
FSDPC_CPU_KERNEL(silu_kernel) {
  require_f32(b, in[0], "x");
  eltwise(dnnl::algorithm::eltwise_swish, 1.0f, 0.0f, cdata<float>(in[0]), mdata<float>(out[0]),
          count_of(out[0]));
}

FSDPC_CPU_KERNEL(rms_norm_kernel) {
  require_f32(b, in[0], "x");
  require_f32(b, in[1], "w");
  const Shape& s = shape_of(in[0]);
  const int64_t c = s.back(), rows = prod(s, 0, s.size() - 1);
  const double eps = b.attrs.get_double("eps");
  const float* x = cdata<float>(in[0]);
  float* y = mdata<float>(out[0]);
  if (c == 0) return;
  FSDPC_CPU_PARALLEL_FOR(rows * c)
  for (int64_t r = 0; r < rows; ++r) rms_norm_row(x + r * c, cdata<float>(in[1]), y + r * c, c, eps);
}

FSDPC_CPU_KERNEL(cross_entropy_kernel) {
  require_f32(b, in[0], "logits");
  const Shape& s = shape_of(in[0]);
  const int64_t v = s.back(), rows = prod(s, 0, s.size() - 1);
  const std::vector<int64_t> targets = checked_targets(b, in[1], v);
  const double total = summed_losses(cdata<float>(in[0]), targets, rows, v);
  // The mean over no positions is NaN, as 0/0 (and the reference).
  mdata<float>(out[0])[0] = static_cast<float>(total / static_cast<double>(rows));
}

}  // namespace fsdpc::cpu
