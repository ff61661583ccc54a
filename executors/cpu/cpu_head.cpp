// The fused head's chunk machinery (cpu_head.h).
#include "executors/cpu/cpu_head.h"

#include <algorithm>
#include <limits>

#include "executors/cpu/cpu_dnnl.h"

namespace fsdpc::cpu {

namespace {

// f32 logits a chunk holds when the op does not say: 32 MiB, 167 rows of
// GPT-2's 50257 words, a gemm large enough to run at the core's FMA rate.
constexpr int64_t kChunkBytes = int64_t{32} << 20;
constexpr int64_t kAlign = 64;  // a cache line, and the CPU allocator's blocks

int64_t aligned(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// x rounded to bf16 and back, in place: the value a bf16 tensor would hold.
FSDPC_CPU_CLONES void round_span(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = round_to_bf16(x[i]);
}

void round_rows(float* z, int64_t n, int64_t v) {
  FSDPC_CPU_PARALLEL_FOR(n * v)
  for (int64_t r = 0; r < n; ++r) round_span(z + r * v, v);
}

}  // namespace

DType head_product_dtype(DType h) {
  return h == DType::bf16 && bf16_products_native() ? DType::bf16 : DType::f32;
}

HeadScratch head_scratch(const BoundSymbol& b, const TensorType& h, const TensorType& w) {
  const int64_t v = w.shape.at(0), c = w.shape.at(1);
  const int64_t rows = numel(h.shape) / std::max<int64_t>(c, 1);
  int64_t chunk = b.attrs.get_int_or("chunk", 0);
  if (chunk <= 0) chunk = kChunkBytes / (static_cast<int64_t>(sizeof(float)) * std::max<int64_t>(v, 1));
  HeadScratch s;
  s.chunk = std::clamp<int64_t>(chunk, 1, std::max<int64_t>(rows, 1));
  s.zb_at = s.dw_at = s.bytes = aligned(s.chunk * v * static_cast<int64_t>(sizeof(float)));
  const bool backward = b.op == OpId::LinearCrossEntropyGrad || b.op == OpId::LinearCrossEntropyWithGrad ||
                        b.op == OpId::LinearCrossEntropyStatsGrad;
  if (!backward || head_product_dtype(h.dtype) != DType::bf16) return s;
  s.dw_at = s.bytes += aligned(s.chunk * v * static_cast<int64_t>(sizeof(uint16_t)));
  if (b.outputs.back().type.dtype != DType::f32)  // dw, each op's last output
    s.bytes += aligned(v * c * static_cast<int64_t>(sizeof(float)));
  return s;
}

ScratchBlock::ScratchBlock(const KernelContext& ctx, int64_t bytes) {
  if (ctx.scratch_pool) {
    held_ = ctx.scratch_pool->scratch(static_cast<size_t>(bytes), false);
    data_ = static_cast<char*>(held_.get());
  } else {
    data_ = reinterpret_cast<char*>(scratch_floats((bytes + 3) / 4, 1));
  }
}

HeadOperands::HeadOperands(const BoundSymbol& b, const Views& in, bool bf16, int64_t classes)
    : h(static_cast<const char*>(in[0].data)),
      w(in[1].data),
      rows(prod(shape_of(in[0]), 0, shape_of(in[0]).size() - 1)),
      c(shape_of(in[1])[1]),
      v(shape_of(in[1])[0]),
      dt(product_dtype(b, {{in[0], "h"}, {in[1], "w"}})),
      bf16_values(bf16),
      targets(checked_targets(b, in[2], classes)) {}

void HeadOperands::logits(int64_t r0, int64_t n, float* z) const {
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

void row_stats(float* z, int64_t n, int64_t stride, int64_t real, const int64_t* cols, RowStats* out) {
  const float inf = std::numeric_limits<float>::infinity();
  FSDPC_CPU_PARALLEL_FOR(n * stride)
  for (int64_t r = 0; r < n; ++r) {
    float* zr = z + r * stride;
    const float m = row_max(zr, real);
    out[r].max = m;
    out[r].picked = cols[r] >= 0 ? zr[cols[r]] : 0.0f;
    for (int64_t j = 0; j < real; ++j) zr[j] -= m;
    std::fill(zr + real, zr + stride, -inf);  // exp(-inf) = 0; with no real column, every one
  }
  eltwise(dnnl::algorithm::eltwise_exp, 0.0f, 0.0f, z, z, n * stride);
  FSDPC_CPU_PARALLEL_FOR(n * stride)
  for (int64_t r = 0; r < n; ++r) out[r].rest = row_sum(z + r * stride, real) - 1.0;
}

void head_backward(const HeadOperands& hd, const HeadScratch& s, char* scratch, const TensorView& dh,
                   const TensorView& dw_out, const std::function<void(float* z, int64_t r0, int64_t n)>& to_dz) {
  const int64_t rows = hd.rows, v = hd.v, c = hd.c;
  const DType dt = hd.dt;
  float* z = reinterpret_cast<float*>(scratch);
  // bf16 products read the cotangent in bf16, as linear's rule does.
  uint16_t* zb = dt == DType::bf16 ? reinterpret_cast<uint16_t*>(scratch + s.zb_at) : nullptr;
  // dw accumulates over the chunks in f32: in place when dw is f32, else
  // in scratch rounded once at the end, as one bf16 gemm over all rows.
  const bool narrow_dw = dw_out.type->dtype != DType::f32;
  float* dw = narrow_dw ? reinterpret_cast<float*>(scratch + s.dw_at) : mdata<float>(dw_out);
  if (rows == 0) std::fill(dw, dw + v * c, 0.0f);
  char* dh_rows = static_cast<char*>(dh.data);
  for (int64_t r0 = 0; r0 < rows; r0 += s.chunk) {
    const int64_t n = std::min(s.chunk, rows - r0);
    hd.logits(r0, n, z);
    to_dz(z, r0, n);
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
    gemm(gh, dz, hd.w, nullptr, dh_rows + r0 * c * static_cast<int64_t>(dtype_size(dt)));
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
  if (narrow_dw) narrow_to_bf16(dw, mdata<uint16_t>(dw_out), v * c);
}

}  // namespace fsdpc::cpu
