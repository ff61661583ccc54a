// Gradient clipping by the global L2 norm when each rank holds only a shard
// of the gradients: the local sum of squares is reduced across ranks by a
// callback, so this file needs no communicator, and the arithmetic runs on
// the gradients' device through its backend.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "executors/device_backend.h"

namespace fsdpc {

// Gradient buffers on the backend's device: (data, element count).
using GradViews = std::vector<std::pair<float*, int64_t>>;

// torch.nn.utils.clip_grad_norm_ on sharded gradients. Sums the squares of
// every local element in double: those of `sharded` are passed to
// `sum_across_ranks` (the caller all-reduces them over the shard group; an
// empty function means identity), those of `replicated` (the same on every
// rank) are added once. Returns the total norm sqrt(global sum) and scales
// every gradient by torch's coefficient min(1, max_norm / (norm + 1e-6)),
// which is below 1 exactly when norm + 1e-6 > max_norm. As in torch
// (error_if_nonfinite=False), a NaN or infinite norm is returned and
// poisons the gradients; callers that want to skip such a step check the
// returned norm. Throws fsdpc::Error unless max_norm is a positive number.
double clip_grad_norm(DeviceBackend& backend, const GradViews& sharded, const GradViews& replicated,
                      double max_norm, const std::function<double(double)>& sum_across_ranks);

// The same norm, without touching the gradients: `scale` is the float
// coefficient clip_grad_norm multiplies them by (1 when it leaves them), for
// a caller that folds it into the optimizer's read of each gradient
// (Optimizer::step's grad_scale) instead of a pass of its own.
struct ClipCoefficient {
  double norm = 0;
  float scale = 1.0f;
};
ClipCoefficient clip_grad_coefficient(DeviceBackend& backend, const GradViews& sharded, const GradViews& replicated,
                                      double max_norm, const std::function<double(double)>& sum_across_ranks);

// The pieces, for a caller whose gradients are cut over more than one group
// (tensor parallelism times FSDP): the local sum of squares of `grads` in
// double, and the coefficient for a global sum of squares.
double sum_of_squares(DeviceBackend& backend, const GradViews& grads);
ClipCoefficient clip_coefficient(double global_sum_of_squares, double max_norm);

}  // namespace fsdpc
