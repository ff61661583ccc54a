// Gradient clipping by the global L2 norm when each rank holds only a shard
// of the gradients: the local sum of squares is reduced across ranks by a
// callback, so this file needs no communicator.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace fsdpc {

// torch.nn.utils.clip_grad_norm_ on sharded gradients. Sums the squares of
// every local element in double, passes the sum to `sum_across_ranks` (the
// caller all-reduces it over the shard group; identity for replicated
// gradients; an empty function means identity), and returns the total norm
// sqrt(global sum). Scales every gradient by torch's coefficient
// min(1, max_norm / (norm + 1e-6)), which is below 1 exactly when
// norm + 1e-6 > max_norm. As in torch (error_if_nonfinite=False), a NaN or
// infinite norm is returned and poisons the gradients; callers that want to
// skip such a step check the returned norm. Throws fsdpc::Error unless
// max_norm is a positive number.
double clip_grad_norm(const std::vector<std::pair<float*, int64_t>>& grads, double max_norm,
                      const std::function<double(double)>& sum_across_ranks);

}  // namespace fsdpc
