// scaled_dot_product_attention, blocked: a group of heads at a time (its
// scores within 16 MiB of reused scratch) and, when causal, a block of query
// rows at a time, whose scores stop at the last key the block can see, so
// the masked half of q·kᵀ and p·v is never computed (~0.56x the FLOPs at
// 1024 tokens). Per block: one batched oneDNN matmul for the scores (keys
// read transposed in place, scale as a post-op), the mask on the diagonal,
// oneDNN's softmax in place, and a second batched matmul with v. In bf16
// (q, k, v and the output), as torch's CPU attention under autocast: the
// scores are accumulated and kept in f32, the softmax runs in f32 and
// rounds its probabilities once to bf16, and p·v is a bf16 product with f32
// accumulation. Below AVX-512 (no oneDNN bf16 kernels) q, k and v are
// widened and the whole attention runs in f32.
//
// Its backward, scaled_dot_product_attention_grad, runs on the same blocks
// and holds no [Tq, Tk] value either: per block it recomputes the scores
// and probabilities p (f32), adds pᵀ·g into dv, forms dp = g·vᵀ and
// ds = p·(dp − rowsum(dp·p))·scale in f32, writes the block's rows of
// dq = ds·k and adds dsᵀ·q into dk. dk and dv accumulate over the query
// blocks in f32 (the outputs themselves in f32, a scratch slab in bf16,
// rounded once at the end). In bf16, p and ds are rounded once for the
// products that read them, as the op's decomposition does.
#include <algorithm>
#include <cmath>
#include <limits>

#include "executors/cpu/cpu_dnnl.h"
#include "executors/cpu/cpu_kernels.h"

namespace fsdpc::cpu {

namespace {

constexpr int64_t kScoreFloats = int64_t{1} << 22;
constexpr int64_t kCausalBlock = 128;  // query rows per block when causal
// The backward's budget for one [heads, rows, keys] f32 buffer; it holds
// two (p and dp) and, in bf16, their rounded copies: about 10 MiB a thread.
constexpr int64_t kGradScoreFloats = int64_t{1} << 20;

struct Attention {
  const void *q, *k, *v;
  void* o;
  int64_t tq, tk, d, dv;
  float scale;
  bool causal;
  DType dtype;  // of q, k, v and o: f32 or bf16
  // Element offsets into q, k, v, and into o.
  const void* at(const void* p, int64_t i) const { return static_cast<const char*>(p) + i * dtype_size(dtype); }
  void* out_at(int64_t i) const { return static_cast<char*>(o) + i * dtype_size(dtype); }
};

// Top-left aligned, as PyTorch's tril mask: key j is visible to query i when
// j <= i. `scores` holds rows i0.. of `heads` heads, `keys` columns each.
void mask_causal(float* scores, int64_t heads, int64_t rows, int64_t keys, int64_t i0) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t r = 0; r < rows; ++r) {
      float* row = scores + (h * rows + r) * keys;
      for (int64_t j = i0 + r + 1; j < keys; ++j) row[j] = kNegInf;
    }
}

// Query rows [i0, i1) of heads [h0, h0 + heads). `probs` holds the bf16
// probabilities (null in f32, where the softmax runs in place).
void attend_block(const Attention& a, float* scores, void* probs, int64_t h0, int64_t heads, int64_t i0,
                  int64_t i1) {
  const int64_t rows = i1 - i0, keys = a.causal ? std::min(i1, a.tk) : a.tk;
  gemm(Gemm{.batch = heads, .m = rows, .k = a.d, .n = keys, .b_transposed = true, .batched_b = true,
            .scale = a.scale, .a_step = a.tq * a.d, .b_step = a.tk * a.d, .in = a.dtype},
       a.at(a.q, (h0 * a.tq + i0) * a.d), a.at(a.k, h0 * a.tk * a.d), nullptr, scores);
  if (a.causal) mask_causal(scores, heads, rows, keys, i0);
  void* p = probs ? probs : scores;
  softmax_3d(scores, p, heads * rows, keys, 1, false, a.dtype);
  gemm(Gemm{.batch = heads, .m = rows, .k = keys, .n = a.dv, .batched_b = true, .b_step = a.tk * a.dv,
            .c_step = a.tq * a.dv, .in = a.dtype, .out = a.dtype, .bias = a.dtype},
       p, a.at(a.v, h0 * a.tk * a.dv), nullptr, a.out_at((h0 * a.tq + i0) * a.dv));
}

// The backward's operands beside the forward's (whose output `o` is then
// dq): g [.., Tq, Dv] in the dtype, and dk and dv, the f32 accumulators of
// the current group of heads ([heads, Tk, D] and [heads, Tk, Dv]).
struct AttentionGrad {
  const void* g;
  float *dk, *dv;
};

// Per-thread scratch of one block, carved from one buffer: f32 scores and
// probabilities p, f32 dp (then ds), and in bf16 the rounded p and ds.
struct GradScratch {
  float *p, *dp;
  void *p_low, *ds_low;
};

// ds = p (dp - rowsum(dp p)) scale, row by row, in place of dp.
FSDPC_CPU_CLONES void softmax_backward_rows(const float* p, float* dp, int64_t rows, int64_t keys, float scale) {
  FSDPC_CPU_PARALLEL_FOR(rows * keys)
  for (int64_t r = 0; r < rows; ++r) {
    const float* pr = p + r * keys;
    float* dr = dp + r * keys;
    float dot = 0.0f;
    for (int64_t j = 0; j < keys; ++j) dot += dr[j] * pr[j];
    for (int64_t j = 0; j < keys; ++j) dr[j] = pr[j] * (dr[j] - dot) * scale;
  }
}

// Query rows [i0, i1) of heads [h0, h0 + heads): their share of dk and dv
// (keys [0, keys) of each head), and their rows of dq.
void attend_block_grad(const Attention& a, const AttentionGrad& gr, const GradScratch& s, int64_t h0, int64_t heads,
                       int64_t i0, int64_t i1) {
  const int64_t rows = i1 - i0, keys = a.causal ? std::min(i1, a.tk) : a.tk;
  const bool low = a.dtype == DType::bf16;
  const void* q_rows = a.at(a.q, (h0 * a.tq + i0) * a.d);
  const void* g_rows = a.at(gr.g, (h0 * a.tq + i0) * a.dv);
  gemm(Gemm{.batch = heads, .m = rows, .k = a.d, .n = keys, .b_transposed = true, .batched_b = true,
            .scale = a.scale, .a_step = a.tq * a.d, .b_step = a.tk * a.d, .in = a.dtype},
       q_rows, a.at(a.k, h0 * a.tk * a.d), nullptr, s.p);
  if (a.causal) mask_causal(s.p, heads, rows, keys, i0);
  softmax_3d(s.p, s.p, heads * rows, keys, 1, false);
  if (low) narrow_to_bf16(s.p, static_cast<uint16_t*>(s.p_low), heads * rows * keys);
  // dv[:keys] += pᵀ g
  gemm(Gemm{.batch = heads, .m = keys, .k = rows, .n = a.dv, .a_transposed = true, .batched_b = true,
            .b_step = a.tq * a.dv, .c_step = a.tk * a.dv, .in = a.dtype, .accumulate = true},
       low ? s.p_low : s.p, g_rows, nullptr, gr.dv);
  // dp = g vᵀ, then ds in its place
  gemm(Gemm{.batch = heads, .m = rows, .k = a.dv, .n = keys, .b_transposed = true, .batched_b = true,
            .a_step = a.tq * a.dv, .b_step = a.tk * a.dv, .in = a.dtype},
       g_rows, a.at(a.v, h0 * a.tk * a.dv), nullptr, s.dp);
  softmax_backward_rows(s.p, s.dp, heads * rows, keys, a.scale);
  if (low) narrow_to_bf16(s.dp, static_cast<uint16_t*>(s.ds_low), heads * rows * keys);
  const void* ds = low ? s.ds_low : s.dp;
  // dq rows = ds k; dk[:keys] += dsᵀ q
  gemm(Gemm{.batch = heads, .m = rows, .k = keys, .n = a.d, .batched_b = true, .b_step = a.tk * a.d,
            .c_step = a.tq * a.d, .in = a.dtype, .out = a.dtype, .bias = a.dtype},
       ds, a.at(a.k, h0 * a.tk * a.d), nullptr, a.out_at((h0 * a.tq + i0) * a.d));
  gemm(Gemm{.batch = heads, .m = keys, .k = rows, .n = a.d, .a_transposed = true, .batched_b = true,
            .b_step = a.tq * a.d, .c_step = a.tk * a.d, .in = a.dtype, .accumulate = true},
       ds, q_rows, nullptr, gr.dk);
}

}  // namespace

FSDPC_CPU_KERNEL(sdpa_kernel) {
  const DType d = product_dtype(b, {{in[0], "q"}, {in[1], "k"}, {in[2], "v"}, {out[0], "the output"}});
  if (d == DType::bf16 && !bf16_products_native())  // widened: scores, probabilities and p·v all in f32
    return run_in_f32(in, out, [&](const Views& in32, const Views& out32) { sdpa_kernel(ctx, b, in32, out32); });
  const Shape& qs = shape_of(in[0]);
  const size_t r = qs.size();
  Attention a{in[0].data, in[1].data, in[2].data, out[0].data,
              qs[r - 2], shape_of(in[1])[r - 2], qs[r - 1], shape_of(in[2])[r - 1], 0.0f,
              b.attrs.get_bool_or("is_causal", false), d};
  a.scale = static_cast<float>(b.attrs.get_double_or("scale", 1.0 / std::sqrt(static_cast<double>(a.d))));
  const int64_t batch = prod(qs, 0, r - 2);
  if (batch == 0 || a.tq == 0 || a.dv == 0) return;
  const int64_t block = a.causal ? std::min(a.tq, kCausalBlock) : a.tq;
  const int64_t group = std::clamp<int64_t>(kScoreFloats / std::max<int64_t>(block * a.tk, 1), 1, batch);
  const int64_t score_floats = group * block * a.tk;
  float* scores = scratch_floats(score_floats, 1);
  void* probs = d == DType::bf16 ? scratch_floats((score_floats + 1) / 2, 0) : nullptr;  // two bf16 per float
  for (int64_t h0 = 0; h0 < batch; h0 += group)
    for (int64_t i0 = 0; i0 < a.tq; i0 += block)
      attend_block(a, scores, probs, h0, std::min(group, batch - h0), i0, std::min(a.tq, i0 + block));
}


FSDPC_CPU_KERNEL(sdpa_grad_kernel) {
  const DType d = product_dtype(b, {{in[0], "q"}, {in[1], "k"}, {in[2], "v"}, {in[3], "g"}, {out[0], "dq"},
                                    {out[1], "dk"}, {out[2], "dv"}});
  if (d == DType::bf16 && !bf16_products_native())  // widened: the whole backward in f32
    return run_in_f32(in, out, [&](const Views& in32, const Views& out32) { sdpa_grad_kernel(ctx, b, in32, out32); });
  const Shape& qs = shape_of(in[0]);
  const size_t r = qs.size();
  Attention a{in[0].data, in[1].data, in[2].data, out[0].data,
              qs[r - 2], shape_of(in[1])[r - 2], qs[r - 1], shape_of(in[2])[r - 1],
              static_cast<float>(b.attrs.get_double("scale")), b.attrs.get_bool_or("is_causal", false), d};
  const int64_t batch = prod(qs, 0, r - 2);
  const bool low = d == DType::bf16;
  // dk and dv are sums over the query rows: zeroed, then accumulated.
  if (!low) {
    std::fill_n(static_cast<float*>(out[1].data), count_of(out[1]), 0.0f);
    std::fill_n(static_cast<float*>(out[2].data), count_of(out[2]), 0.0f);
  }
  if (batch == 0 || a.tq == 0 || a.tk == 0) {  // no score: every gradient is zero
    if (low)
      for (const TensorView& o : out) std::fill_n(static_cast<uint16_t*>(o.data), count_of(o), uint16_t{0});
    else
      std::fill_n(static_cast<float*>(out[0].data), count_of(out[0]), 0.0f);
    return;
  }
  // Blocks of query rows whose scores fit the budget with a group of heads
  // beside them: two f32 [heads, rows, keys] buffers (p and dp), and their
  // bf16 copies.
  const int64_t block = a.causal ? std::min(a.tq, kCausalBlock)
                                 : std::clamp<int64_t>(kGradScoreFloats / a.tk, 1, a.tq);
  const int64_t group = std::clamp<int64_t>(kGradScoreFloats / (block * a.tk), 1, batch);
  const int64_t score_floats = group * block * a.tk;
  const int64_t slab = low ? group * a.tk * (a.d + a.dv) : 0;  // the f32 dk and dv of a group
  float* base = scratch_floats(2 * score_floats + (low ? score_floats + 2 : 0) + slab, 1);
  GradScratch s{base, base + score_floats, nullptr, nullptr};
  float* next = base + 2 * score_floats;
  if (low) {  // two bf16 per float
    s.p_low = next;
    s.ds_low = next + (score_floats + 1) / 2;
    next += score_floats + 2;
  }
  for (int64_t h0 = 0; h0 < batch; h0 += group) {
    const int64_t heads = std::min(group, batch - h0);
    AttentionGrad gr{in[3].data, nullptr, nullptr};
    if (low) {
      gr.dk = next;
      gr.dv = next + heads * a.tk * a.d;
      std::fill_n(next, heads * a.tk * (a.d + a.dv), 0.0f);
    } else {
      gr.dk = static_cast<float*>(out[1].data) + h0 * a.tk * a.d;
      gr.dv = static_cast<float*>(out[2].data) + h0 * a.tk * a.dv;
    }
    for (int64_t i0 = 0; i0 < a.tq; i0 += block)
      attend_block_grad(a, gr, s, h0, heads, i0, std::min(a.tq, i0 + block));
    if (low) {
      narrow_to_bf16(gr.dk, static_cast<uint16_t*>(out[1].data) + h0 * a.tk * a.d, heads * a.tk * a.d);
      narrow_to_bf16(gr.dv, static_cast<uint16_t*>(out[2].data) + h0 * a.tk * a.dv, heads * a.tk * a.dv);
    }
  }
}

}  // namespace fsdpc::cpu
