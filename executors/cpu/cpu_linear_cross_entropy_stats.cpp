// linear_cross_entropy_stats and its gradient (passes/tensor_parallel_vocab.cpp):
// one tensor-parallel rank's slice of the vocabulary-parallel head, w [V/T, C]
// holding the classes offset .. offset + V/T - 1, those from `vocab` on
// padding, over chunks of rows as linear_cross_entropy (cpu_head.h):
//   forward   per row over the slice's real classes, lse = m + log1p(rest)
//             (row_stats), and the target's logit where the slice holds it;
//   backward  dz = dlse * exp(z - lse) over the real classes, 0 over the
//             padding, + dtarget at the target where the slice holds it,
//             then dh's rows = dz w (this rank's part of dh: the trace sums
//             the parts over tp) and dw += dzᵀ h's rows.
// Both the max and the sum stay in the slice: the trace combines the
// ranks' lse (an all_reduce of their max, then one of exp(lse - max) and
// the target logits), so a rank reads its logits once a step in the
// forward and once in the backward, as the fused head without tp does.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "executors/cpu/cpu_head.h"

namespace fsdpc::cpu {

namespace {

// The slice's first class, and its real columns [0, real).
struct Slice {
  int64_t offset, real;
  Slice(const BoundSymbol& b, const TensorView& offset_view, int64_t v) {
    const DType d = offset_view.type->dtype;
    if (d != DType::i64 && d != DType::i32)
      fail("cpu_", op_name(b.op), ": offset has dtype ", dtype_name(d), "; expected i32 or i64");
    offset = d == DType::i64 ? cdata<int64_t>(offset_view)[0] : cdata<int32_t>(offset_view)[0];
    real = std::clamp<int64_t>(b.attrs.get_int("vocab") - offset, 0, v);
  }
  // Each row's target column in the slice, -1 where another slice holds it.
  std::vector<int64_t> columns(const std::vector<int64_t>& targets, int64_t v) const {
    std::vector<int64_t> cols(targets.size());
    for (size_t r = 0; r < targets.size(); ++r) {
      const int64_t t = targets[r] - offset;
      cols[r] = t >= 0 && t < v ? t : -1;
    }
    return cols;
  }
};

void require_row_dtype(const BoundSymbol& b, const TensorView& t, const char* what) {
  if (t.type->dtype != DType::f32)
    fail("cpu_", op_name(b.op), ": ", what, " is ", dtype_name(t.type->dtype), "; the CPU computes it in f32");
}

}  // namespace

FSDPC_CPU_KERNEL(linear_cross_entropy_stats_kernel) {
  with_products(b, in, out, [&](const Views& ins, const Views& outs, bool bf16) {
    const HeadOperands hd(b, ins, bf16, b.attrs.get_int("vocab"));
    const Slice slice(b, ins[3], hd.v);
    require_row_dtype(b, outs[0], "lse");
    require_row_dtype(b, outs[1], "the target logit");
    const std::vector<int64_t> cols = slice.columns(hd.targets, hd.v);
    const HeadScratch s = head_scratch(b, *in[0].type, *in[1].type);
    const ScratchBlock scratch(ctx, s.bytes);
    float* z = reinterpret_cast<float*>(scratch.data());
    float* lse = mdata<float>(outs[0]);
    float* target = mdata<float>(outs[1]);
    std::vector<RowStats> stats(static_cast<size_t>(s.chunk));
    for (int64_t r0 = 0; r0 < hd.rows; r0 += s.chunk) {
      const int64_t n = std::min(s.chunk, hd.rows - r0);
      hd.logits(r0, n, z);
      row_stats(z, n, hd.v, slice.real, cols.data() + r0, stats.data());
      for (int64_t r = 0; r < n; ++r) {
        lse[r0 + r] = static_cast<float>(static_cast<double>(stats[r].max) + std::log1p(stats[r].rest));
        target[r0 + r] = stats[r].picked;
      }
    }
  });
}

FSDPC_CPU_KERNEL(linear_cross_entropy_stats_grad_kernel) {
  with_products(b, in, out, [&](const Views& ins, const Views& outs, bool bf16) {
    const HeadOperands hd(b, ins, bf16, b.attrs.get_int("vocab"));
    const Slice slice(b, ins[3], hd.v);
    require_row_dtype(b, ins[4], "lse");
    require_row_dtype(b, ins[5], "lse's cotangent");
    require_row_dtype(b, ins[6], "the target logit's cotangent");
    const std::vector<int64_t> cols = slice.columns(hd.targets, hd.v);
    const float *lse = cdata<float>(ins[4]), *dlse = cdata<float>(ins[5]), *dtarget = cdata<float>(ins[6]);
    const HeadScratch s = head_scratch(b, *in[0].type, *in[1].type);
    const ScratchBlock scratch(ctx, s.bytes);
    const float inf = std::numeric_limits<float>::infinity();
    head_backward(hd, s, scratch.data(), outs[0], outs[1], [&](float* z, int64_t r0, int64_t n) {
      const int64_t v = hd.v, real = slice.real;
      // The padding's exp(-inf) is 0; so is every column of a row whose
      // slice has no real class (lse -inf), never exp(z - lse) = inf.
      FSDPC_CPU_PARALLEL_FOR(n * v)
      for (int64_t r = 0; r < n; ++r) {
        float* zr = z + r * v;
        for (int64_t j = 0; j < real; ++j) zr[j] -= lse[r0 + r];
        std::fill(zr + real, zr + v, -inf);
      }
      eltwise(dnnl::algorithm::eltwise_exp, 0.0f, 0.0f, z, z, n * v);
      FSDPC_CPU_PARALLEL_FOR(n * v)
      for (int64_t r = 0; r < n; ++r) {
        float* zr = z + r * v;
        const float d = dlse[r0 + r];
        for (int64_t j = 0; j < real; ++j) zr[j] *= d;
        if (cols[r0 + r] >= 0) zr[cols[r0 + r]] += dtarget[r0 + r];
      }
    });
  });
}

}  // namespace fsdpc::cpu
