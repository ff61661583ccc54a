// Global-norm gradient clipping over shards (see runtime/clip.h).
#include "runtime/clip.h"

#include <cmath>

#include "ir/error.h"

namespace fsdpc {

double clip_grad_norm(const std::vector<std::pair<float*, int64_t>>& grads, double max_norm,
                      const std::function<double(double)>& sum_across_ranks) {
  if (!(max_norm > 0) || std::isinf(max_norm))
    fail("clip_grad_norm: max_norm must be a positive number, got ", max_norm);
  // A float's square is exact in double, so only the additions round.
  double local = 0.0;
  for (const auto& [g, n] : grads)
    for (int64_t i = 0; i < n; ++i) local += static_cast<double>(g[i]) * static_cast<double>(g[i]);
  const double global = sum_across_ranks ? sum_across_ranks(local) : local;
  const double norm = std::sqrt(global);
  const double coef = max_norm / (norm + 1e-6);
  // Written so that a NaN coefficient scales (and poisons), as torch's
  // clamp(coef, max=1) does.
  if (coef >= 1.0) return norm;
  // torch multiplies float32 gradients by a float32 coefficient.
  const float c = static_cast<float>(coef);
  for (const auto& [g, n] : grads)
    for (int64_t i = 0; i < n; ++i) g[i] *= c;
  return norm;
}

}  // namespace fsdpc
