// linear_cross_entropy, linear_cross_entropy_grad (passes/fuse_head.h) and
// linear_cross_entropy_with_grad (passes/head_grad_forward.h): the
// language-model head and its loss over chunks of rows, so no buffer larger
// than [chunk, V] lives. A chunk's logits h[r0:r0+n] wᵀ are one oneDNN
// gemm into f32 (bf16 operands: bf16 products accumulated in f32), then:
//   forward   each row's logsumexp(z) - z[target] (row_stats, as cross_entropy's
//             row_losses computes it),
//             summed in row order over the whole batch, divided by the rows;
//   backward  dz = (softmax(z) - onehot) * g / rows in place (oneDNN's
//             softmax, as the unfused rule's), then dh[r0:r0+n] = dz w and
//             dw += dzᵀ h[r0:r0+n] (a gemm that accumulates into dw).
//   both      (with_grad) each block's row statistics give the loss's terms,
//             then the block becomes dz as in the backward: the loss and
//             both gradients from one product of logits, as Liger's kernel.
// The gradient alone recomputes the logits (one more [rows, C] x [C, V]
// product a step); head_grad_forward puts with_grad in the forward wherever
// the loss's cotangent is known there, so training pays it only where it
// is not (tensor parallelism's slices, pipeline stages).
//
// With bf16 h and w each value is rounded where the decomposition rounds it
// (linear's bf16 logits, the bf16 cotangent linear's rule multiplies), so
// fused and unfused agree to f32 rounding; on a CPU without oneDNN's bf16
// kernels the operands are widened (run_in_f32) and the rounding kept.
// The chunk, the scratch and the loop over the chunks: cpu_head.h.
#include <algorithm>
#include <cmath>
#include <vector>

#include "executors/cpu/cpu_head.h"

namespace fsdpc::cpu {

FSDPC_CPU_KERNEL(linear_cross_entropy_kernel) {
  with_products(b, in, out, [&](const Views& ins, const Views& outs, bool bf16) {
    const HeadOperands hd(b, ins, bf16, shape_of(ins[1])[0]);
    if (outs[0].type->dtype != DType::f32)
      fail("cpu_", op_name(b.op), ": the loss is ", dtype_name(outs[0].type->dtype), "; the CPU computes it in f32");
    const HeadScratch s = head_scratch(b, *in[0].type, *in[1].type);
    const ScratchBlock scratch(ctx, s.bytes);
    float* z = reinterpret_cast<float*>(scratch.data());
    std::vector<RowStats> stats(static_cast<size_t>(s.chunk));
    double total = 0.0;  // in row order, as cross_entropy sums them; the mean over no rows is NaN
    for (int64_t r0 = 0; r0 < hd.rows; r0 += s.chunk) {
      const int64_t n = std::min(s.chunk, hd.rows - r0);
      hd.logits(r0, n, z);
      row_stats(z, n, hd.v, hd.v, hd.targets.data() + r0, stats.data());
      for (int64_t r = 0; r < n; ++r)
        total += std::log1p(stats[r].rest) + (static_cast<double>(stats[r].max) - stats[r].picked);
    }
    mdata<float>(outs[0])[0] = static_cast<float>(total / static_cast<double>(hd.rows));
  });
}

FSDPC_CPU_KERNEL(linear_cross_entropy_grad_kernel) {
  with_products(b, in, out, [&](const Views& ins, const Views& outs, bool bf16) {
    const HeadOperands hd(b, ins, bf16, shape_of(ins[1])[0]);
    if (ins[3].type->dtype != DType::f32)
      fail("cpu_", op_name(b.op), ": g is ", dtype_name(ins[3].type->dtype), "; the CPU takes an f32 loss");
    // The decomposition's g / rows, an f32 division.
    const float scale = cdata<float>(ins[3])[0] / static_cast<float>(hd.rows);
    const HeadScratch s = head_scratch(b, *in[0].type, *in[1].type);
    const ScratchBlock scratch(ctx, s.bytes);
    head_backward(hd, s, scratch.data(), outs[0], outs[1], [&](float* z, int64_t r0, int64_t n) {
      const int64_t v = hd.v;
      softmax_3d(z, z, n, v, 1, false);
      const int64_t* t = hd.targets.data() + r0;
      FSDPC_CPU_PARALLEL_FOR(n * v)
      for (int64_t r = 0; r < n; ++r) {
        float* zr = z + r * v;
        zr[t[r]] -= 1.0f;
        for (int64_t j = 0; j < v; ++j) zr[j] *= scale;
      }
    });
  });
}

FSDPC_CPU_KERNEL(linear_cross_entropy_with_grad_kernel) {
  with_products(b, in, out, [&](const Views& ins, const Views& outs, bool bf16) {
    const HeadOperands hd(b, ins, bf16, shape_of(ins[1])[0]);
    if (outs[0].type->dtype != DType::f32)
      fail("cpu_", op_name(b.op), ": the loss is ", dtype_name(outs[0].type->dtype), "; the CPU computes it in f32");
    if (ins[3].type->dtype != DType::f32)
      fail("cpu_", op_name(b.op), ": g is ", dtype_name(ins[3].type->dtype), "; the CPU takes an f32 loss");
    const float scale = cdata<float>(ins[3])[0] / static_cast<float>(hd.rows);
    const HeadScratch s = head_scratch(b, *in[0].type, *in[1].type);
    const ScratchBlock scratch(ctx, s.bytes);
    std::vector<RowStats> stats(static_cast<size_t>(s.chunk));
    double total = 0.0;  // in row order, as linear_cross_entropy sums them
    head_backward(hd, s, scratch.data(), outs[1], outs[2], [&](float* z, int64_t r0, int64_t n) {
      const int64_t v = hd.v;
      const int64_t* t = hd.targets.data() + r0;
      row_stats(z, n, v, v, t, stats.data());  // z holds exp(z - max)
      for (int64_t r = 0; r < n; ++r)
        total += std::log1p(stats[r].rest) + (static_cast<double>(stats[r].max) - stats[r].picked);
      FSDPC_CPU_PARALLEL_FOR(n * v)
      for (int64_t r = 0; r < n; ++r) {
        float* zr = z + r * v;
        const float sum = static_cast<float>(stats[r].rest + 1.0);  // m's own term, exp(0)
        for (int64_t j = 0; j < v; ++j) zr[j] /= sum;
        zr[t[r]] -= 1.0f;
        for (int64_t j = 0; j < v; ++j) zr[j] *= scale;
      }
    });
    mdata<float>(outs[0])[0] = static_cast<float>(total / static_cast<double>(hd.rows));
  });
}

}  // namespace fsdpc::cpu
