// The int8 format's sizes and error bound (ir/quantize.h).
#include "ir/quantize.h"

#include <cfloat>
#include <cmath>

namespace fsdpc {

float quantize_scale(float amax) {
  // 127 s is exact in double (24 + 7 bits), so the step down is exact too.
  float s = static_cast<float>(static_cast<double>(amax) / kQuantLevels);
  if (static_cast<double>(s) * kQuantLevels > amax) s = std::nextafter(s, 0.0f);
  return s;
}

int64_t quantized_row_bytes(int64_t n, int64_t block) { return n + 4 * ((n + block - 1) / block); }

std::optional<int64_t> dequantized_row_size(int64_t bytes, int64_t block) {
  if (bytes < 0 || block < 1) return std::nullopt;
  // A row of k full blocks and r in (0, block] more values has k + 1 scales
  // and k (block + 4) + r + 4 bytes: the scale count is bytes / (block + 4),
  // rounded up.
  const int64_t scales = (bytes + block + 3) / (block + 4);
  const int64_t n = bytes - 4 * scales;
  if (n < 0 || quantized_row_bytes(n, block) != bytes) return std::nullopt;
  return n;
}

double quantize_error_bound(double amax) {
  const double step = amax / kQuantLevels;
  return 0.5 * step + 4.0 * FLT_EPSILON * amax + kQuantLevels * static_cast<double>(FLT_MIN);
}

}  // namespace fsdpc
