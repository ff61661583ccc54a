// Global-norm gradient clipping over shards (see runtime/clip.h).
#include "runtime/clip.h"

#include <cmath>

#include "ir/error.h"

namespace fsdpc {

namespace {
std::vector<DeviceBackend::Span> spans(const GradViews& grads) {
  std::vector<DeviceBackend::Span> out;
  for (const auto& [g, n] : grads) out.push_back({g, n});
  return out;
}
}  // namespace

double sum_of_squares(DeviceBackend& backend, const GradViews& grads) { return backend.sum_squares(spans(grads)); }

ClipCoefficient clip_coefficient(double global, double max_norm) {
  if (!(max_norm > 0) || std::isinf(max_norm))
    fail("clip_grad_norm: max_norm must be a positive number, got ", max_norm);
  const double norm = std::sqrt(global);
  const double coef = max_norm / (norm + 1e-6);
  // Written so that a NaN coefficient scales (and poisons), as torch's
  // clamp(coef, max=1) does.
  if (coef >= 1.0) return {norm, 1.0f};
  // torch multiplies float32 gradients by a float32 coefficient.
  return {norm, static_cast<float>(coef)};
}

ClipCoefficient clip_grad_coefficient(DeviceBackend& backend, const GradViews& sharded, const GradViews& replicated,
                                      double max_norm, const std::function<double(double)>& sum_across_ranks) {
  if (!(max_norm > 0) || std::isinf(max_norm))
    fail("clip_grad_norm: max_norm must be a positive number, got ", max_norm);
  const double local = sum_of_squares(backend, sharded);
  return clip_coefficient((sum_across_ranks ? sum_across_ranks(local) : local) + sum_of_squares(backend, replicated),
                          max_norm);
}

double clip_grad_norm(DeviceBackend& backend, const GradViews& sharded, const GradViews& replicated,
                      double max_norm, const std::function<double(double)>& sum_across_ranks) {
  const ClipCoefficient c = clip_grad_coefficient(backend, sharded, replicated, max_norm, sum_across_ranks);
  // 1 leaves every float as it is (NaN payloads and -0 included): no pass.
  if (c.scale == 1.0f) return c.norm;
  for (const GradViews* set : {&sharded, &replicated})
    for (const auto& [g, n] : *set) backend.scale(g, n, c.scale);
  return c.norm;
}

}  // namespace fsdpc
