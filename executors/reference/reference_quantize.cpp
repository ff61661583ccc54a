// quantize and dequantize in the reference executor: ir/quantize.h's int8
// rows, written from the format's definition in float64 (the codes of
// x / s for the f32 scale s the format stores), one byte per element. The
// values are f32 or bf16 ones, so their largest magnitude is an f32.
#include <algorithm>
#include <cstring>

#include "executors/reference/reference_internal.h"
#include "ir/quantize.h"

namespace fsdpc::reference {

namespace {

struct Layout {
  int64_t rows, n, block, scales;
};

Layout layout_of(const Shape& values, int64_t block) {
  const int64_t n = values.back();
  return {n == 0 ? 0 : numel(values) / n, n, block, (n + block - 1) / block};
}

}  // namespace

Data quantize(const BoundSymbol& b, const Value& x) {
  const Layout g = layout_of(x.type.shape, b.attrs.get_int("block"));
  const int64_t bytes = quantized_row_bytes(g.n, g.block);
  Data q(g.rows * bytes);
  for (int64_t r = 0; r < g.rows; ++r)
    for (int64_t j = 0; j < g.scales; ++j) {
      const int64_t begin = j * g.block, end = std::min(g.n, begin + g.block);
      const double* v = x.data.data() + r * g.n;
      double amax = 0;
      for (int64_t i = begin; i < end; ++i) {
        if (!std::isfinite(v[i]))
          fail("reference quantize: ", b.inputs[0].name, " holds ", v[i], " in row ", r, ", values [", begin, ", ",
               end, "); int8 codes only finite values");
        amax = std::max(amax, std::abs(v[i]));
      }
      const float s = quantize_scale(static_cast<float>(amax));
      double* out = q.data() + r * bytes;
      for (int64_t i = begin; i < end; ++i)
        out[i] = s == 0 ? 0.0 : std::clamp(std::nearbyint(v[i] / s), double{-kQuantLevels}, double{kQuantLevels});
      unsigned char sb[4];
      std::memcpy(sb, &s, 4);
      for (int k = 0; k < 4; ++k) out[g.n + 4 * j + k] = static_cast<int8_t>(sb[k]);
    }
  return q;
}

Data dequantize(const BoundSymbol& b, const Value& q, const TensorType& out) {
  const Layout g = layout_of(out.shape, b.attrs.get_int("block"));
  const int64_t bytes = quantized_row_bytes(g.n, g.block);
  Data y(g.rows * g.n);
  for (int64_t r = 0; r < g.rows; ++r) {
    const double* in = q.data.data() + r * bytes;
    for (int64_t i = 0; i < g.n; ++i) {
      unsigned char sb[4];
      for (int k = 0; k < 4; ++k) sb[k] = static_cast<unsigned char>(static_cast<int8_t>(in[g.n + 4 * (i / g.block) + k]));
      float s;
      std::memcpy(&s, sb, 4);
      y[r * g.n + i] = in[i] * s;
    }
  }
  return y;
}

}  // namespace fsdpc::reference
