// scaled_dot_product_attention, blocked: a group of heads at a time (its
// scores within 16 MiB of reused scratch) and, when causal, a block of query
// rows at a time, whose scores stop at the last key the block can see, so
// the masked half of q·kᵀ and p·v is never computed (~0.56x the FLOPs at
// 1024 tokens). Per block: one batched oneDNN matmul for the scores (keys
// read transposed in place, scale as a post-op), the mask on the diagonal,
// oneDNN's softmax in place, and a second batched matmul with v.
#include <algorithm>
#include <cmath>
#include <limits>

#include "executors/cpu/cpu_dnnl.h"
#include "executors/cpu/cpu_kernels.h"

namespace fsdpc::cpu {

namespace {

constexpr int64_t kScoreFloats = int64_t{1} << 22;
constexpr int64_t kCausalBlock = 128;  // query rows per block when causal

struct Attention {
  const float *q, *k, *v;
  float* o;
  int64_t tq, tk, d, dv;
  float scale;
  bool causal;
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

// Query rows [i0, i1) of heads [h0, h0 + heads).
void attend_block(const Attention& a, float* scores, int64_t h0, int64_t heads, int64_t i0, int64_t i1) {
  const int64_t rows = i1 - i0, keys = a.causal ? std::min(i1, a.tk) : a.tk;
  gemm(Gemm{.batch = heads, .m = rows, .k = a.d, .n = keys, .b_transposed = true, .batched_b = true,
            .scale = a.scale, .a_step = a.tq * a.d, .b_step = a.tk * a.d},
       a.q + (h0 * a.tq + i0) * a.d, a.k + h0 * a.tk * a.d, nullptr, scores);
  if (a.causal) mask_causal(scores, heads, rows, keys, i0);
  softmax_3d(scores, scores, heads * rows, keys, 1, false);
  gemm(Gemm{.batch = heads, .m = rows, .k = keys, .n = a.dv, .batched_b = true, .b_step = a.tk * a.dv,
            .c_step = a.tq * a.dv},
       scores, a.v + h0 * a.tk * a.dv, nullptr, a.o + (h0 * a.tq + i0) * a.dv);
}

}  // namespace

FSDPC_CPU_KERNEL(sdpa_kernel) {
  for (size_t i = 0; i < 3; ++i) require_f32(b, in[i], i == 0 ? "q" : i == 1 ? "k" : "v");
  const Shape& qs = shape_of(in[0]);
  const size_t r = qs.size();
  Attention a{cdata<float>(in[0]), cdata<float>(in[1]), cdata<float>(in[2]), mdata<float>(out[0]),
              qs[r - 2], shape_of(in[1])[r - 2], qs[r - 1], shape_of(in[2])[r - 1], 0.0f,
              b.attrs.get_bool_or("is_causal", false)};
  a.scale = static_cast<float>(b.attrs.get_double_or("scale", 1.0 / std::sqrt(static_cast<double>(a.d))));
  const int64_t batch = prod(qs, 0, r - 2);
  if (batch == 0 || a.tq == 0 || a.dv == 0) return;
  const int64_t block = a.causal ? std::min(a.tq, kCausalBlock) : a.tq;
  const int64_t group = std::clamp<int64_t>(kScoreFloats / std::max<int64_t>(block * a.tk, 1), 1, batch);
  float* scores = scratch_floats(group * block * a.tk, 1);
  for (int64_t h0 = 0; h0 < batch; h0 += group)
    for (int64_t i0 = 0; i0 < a.tq; i0 += block)
      attend_block(a, scores, h0, std::min(group, batch - h0), i0, std::min(a.tq, i0 + block));
}

}  // namespace fsdpc::cpu
