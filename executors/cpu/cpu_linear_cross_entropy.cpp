// linear_cross_entropy and linear_cross_entropy_grad (passes/fuse_head.h):
// the language-model head and its loss over chunks of rows, so no buffer
// larger than [chunk, V] lives. A chunk's logits h[r0:r0+n] wᵀ are one oneDNN
// gemm into f32 (bf16 operands: bf16 products accumulated in f32), then:
//   forward   each row's logsumexp(z) - z[target] (cross_entropy's row_losses),
//             summed in row order over the whole batch, divided by the rows;
//   backward  dz = (softmax(z) - onehot) * g / rows in place (oneDNN's
//             softmax, as the unfused rule's), then dh[r0:r0+n] = dz w and
//             dw += dzᵀ h[r0:r0+n] (a gemm that accumulates into dw).
// The backward recomputes the logits rather than computing both gradients
// in the forward (Liger's kernel): that would have the forward hand the
// backward a [V, C] weight gradient (and [rows, C] input gradient) to hold
// through every block's backward, a parameter-sized buffer, unsharded under
// zero3, at the very peak the fusion exists to lower, and a forward whose
// outputs depend on what needs gradients. Recomputing costs one more
// [rows, C] x [C, V] product a step (the head's share of the FLOPs goes from
// 3 to 4 such products).
//
// With bf16 h and w each value is rounded where the decomposition rounds it
// (linear's bf16 logits, the bf16 cotangent linear's rule multiplies), so
// fused and unfused agree to f32 rounding; on a CPU without oneDNN's bf16
// kernels the operands are widened (run_in_f32) and the rounding kept.
// The chunk: `chunk` rows when the attribute is set, else as many rows as
// kChunkBytes of f32 logits hold.
#include <algorithm>
#include <vector>

#include "executors/cpu/cpu_dnnl.h"
#include "executors/cpu/cpu_kernels.h"

namespace fsdpc::cpu {

namespace {

// f32 logits a chunk holds when the op does not say: 32 MiB, 167 rows of
// GPT-2's 50257 words, a gemm large enough to run at the core's FMA rate.
constexpr int64_t kChunkBytes = int64_t{32} << 20;

int64_t chunk_rows(const BoundSymbol& b, int64_t rows, int64_t v) {
  int64_t c = b.attrs.get_int_or("chunk", 0);
  if (c <= 0) c = kChunkBytes / (static_cast<int64_t>(sizeof(float)) * std::max<int64_t>(v, 1));
  return std::clamp<int64_t>(c, 1, std::max<int64_t>(rows, 1));
}

// x rounded to bf16 and back, in place: the value a bf16 tensor would hold.
FSDPC_CPU_CLONES void round_span(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = round_to_bf16(x[i]);
}

void round_rows(float* z, int64_t n, int64_t v) {
  FSDPC_CPU_PARALLEL_FOR(n * v)
  for (int64_t r = 0; r < n; ++r) round_span(z + r * v, v);
}

// The head's operands as the kernels read them: h [rows, C] and w [V, C],
// both f32 or both bf16 (`dt`); `bf16_values`: round what the decomposition
// holds in bf16 (true for bf16, also when widened to f32 here).
struct HeadOperands {
  const char* h;
  const void* w;
  int64_t rows, c, v;
  DType dt;
  bool bf16_values;
  std::vector<int64_t> targets;

  const void* h_rows(int64_t r0) const { return h + r0 * c * static_cast<int64_t>(dtype_size(dt)); }

  HeadOperands(const BoundSymbol& b, const Views& in, bool bf16)
      : h(static_cast<const char*>(in[0].data)),
        w(in[1].data),
        rows(prod(shape_of(in[0]), 0, shape_of(in[0]).size() - 1)),
        c(shape_of(in[1])[1]),
        v(shape_of(in[1])[0]),
        dt(product_dtype(b, {{in[0], "h"}, {in[1], "w"}})),
        bf16_values(bf16),
        targets(checked_targets(b, in[2], v)) {}

  // z [n, V] = h[r0:r0+n] wᵀ in f32, rounded as bf16 logits when they are.
  void logits(int64_t r0, int64_t n, float* z) const {
    Gemm g;
    g.m = n;
    g.k = c;
    g.n = v;
    g.b_transposed = true;
    g.in = dt;
    g.out = g.bias = DType::f32;
    gemm(g, h_rows(r0), w, nullptr, z);
    if (bf16_values) round_rows(z, n, v);
  }
};

// Runs body(in, out, bf16_values) on views oneDNN's products take: as they
// are (f32, or bf16 where oneDNN has bf16 kernels), else widened to f32.
template <class Body>
void with_products(const BoundSymbol& b, const Views& in, const Views& out, Body&& body) {
  const DType d = product_dtype(b, {{in[0], "h"}, {in[1], "w"}});
  if (d == DType::bf16 && !bf16_products_native())
    return run_in_f32(in, out, [&](const Views& in32, const Views& out32) { body(in32, out32, true); });
  body(in, out, d == DType::bf16);
}

}  // namespace

FSDPC_CPU_KERNEL(linear_cross_entropy_kernel) {
  with_products(b, in, out, [&](const Views& ins, const Views& outs, bool bf16) {
    const HeadOperands hd(b, ins, bf16);
    if (outs[0].type->dtype != DType::f32)
      fail("cpu_", op_name(b.op), ": the loss is ", dtype_name(outs[0].type->dtype), "; the CPU computes it in f32");
    const int64_t chunk = chunk_rows(b, hd.rows, hd.v);
    float* z = scratch_floats(chunk * hd.v, 1);  // slot 0 is row_losses' own
    std::vector<double> losses(static_cast<size_t>(hd.rows));
    for (int64_t r0 = 0; r0 < hd.rows; r0 += chunk) {
      const int64_t n = std::min(chunk, hd.rows - r0);
      hd.logits(r0, n, z);
      row_losses(z, hd.targets.data() + r0, n, hd.v, losses.data() + r0);
    }
    // In row order, as cross_entropy sums them; the mean over no rows is NaN.
    double total = 0.0;
    for (double l : losses) total += l;
    mdata<float>(outs[0])[0] = static_cast<float>(total / static_cast<double>(hd.rows));
  });
}

FSDPC_CPU_KERNEL(linear_cross_entropy_grad_kernel) {
  with_products(b, in, out, [&](const Views& ins, const Views& outs, bool bf16) {
    const HeadOperands hd(b, ins, bf16);
    if (ins[3].type->dtype != DType::f32)
      fail("cpu_", op_name(b.op), ": g is ", dtype_name(ins[3].type->dtype), "; the CPU takes an f32 loss");
    const int64_t rows = hd.rows, v = hd.v, c = hd.c;
    const DType dt = hd.dt;
    // The decomposition's g / rows, an f32 division.
    const float scale = cdata<float>(ins[3])[0] / static_cast<float>(rows);
    const int64_t chunk = chunk_rows(b, rows, v);
    float* z = scratch_floats(chunk * v, 1);
    // bf16 products read the cotangent in bf16, as linear's rule does.
    uint16_t* zb = dt == DType::bf16 ? reinterpret_cast<uint16_t*>(scratch_floats((chunk * v + 1) / 2, 0)) : nullptr;
    // dw accumulates over the chunks in f32: in place when dw is f32, else
    // in a buffer rounded once at the end, as one bf16 gemm over all rows.
    std::vector<float> dw32;
    float* dw = mdata<float>(outs[1]);
    if (outs[1].type->dtype != DType::f32) {
      dw32.resize(static_cast<size_t>(v * c));
      dw = dw32.data();
    }
    if (rows == 0) std::fill(dw, dw + v * c, 0.0f);
    char* dh = static_cast<char*>(outs[0].data);
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
      const int64_t n = std::min(chunk, rows - r0);
      hd.logits(r0, n, z);
      softmax_3d(z, z, n, v, 1, false);
      const int64_t* t = hd.targets.data() + r0;
      FSDPC_CPU_PARALLEL_FOR(n * v)
      for (int64_t r = 0; r < n; ++r) {
        float* zr = z + r * v;
        zr[t[r]] -= 1.0f;
        for (int64_t j = 0; j < v; ++j) zr[j] *= scale;
      }
      const void* dz = z;
      if (dt == DType::bf16) {
        narrow_to_bf16(z, zb, n * v);
        dz = zb;
      } else if (hd.bf16_values) {
        round_rows(z, n, v);  // widened: the bf16 cotangent's values in f32
      }
      Gemm gh;  // dh rows = dz [n, V] w [V, C]
      gh.m = n;
      gh.k = v;
      gh.n = c;
      gh.in = gh.out = gh.bias = dt;
      gemm(gh, dz, hd.w, nullptr, dh + r0 * c * static_cast<int64_t>(dtype_size(dt)));
      Gemm gw;  // dw (+)= dzᵀ [V, n] h rows [n, C]
      gw.m = v;
      gw.k = n;
      gw.n = c;
      gw.a_transposed = true;
      gw.in = dt;
      gw.out = gw.bias = DType::f32;
      gw.accumulate = r0 > 0;
      gemm(gw, dz, hd.h_rows(r0), nullptr, dw);
    }
    if (!dw32.empty()) narrow_to_bf16(dw32.data(), mdata<uint16_t>(outs[1]), v * c);
  });
}

}  // namespace fsdpc::cpu
