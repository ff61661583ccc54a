// Parameter initialisation where each rank materialises only its own shard:
// every element is a pure function of (seed, parameter path, global index),
// so the ranks' shards concatenate to the unsharded initialisation for any
// world size, and no rank ever holds the full parameter.
#pragma once

#include <cstdint>
#include <string_view>

#include "ir/types.h"
#include "passes/tensor_parallel_plan.h"

namespace fsdpc {

// Mirrors the frontend's Init (frontend/module.h); the runtime sits below the
// frontend, so the caller converts. normal: N(0, scale); uniform:
// U(-scale, scale); zeros and ones ignore scale.
struct ParamInit {
  enum class Kind { normal, uniform, zeros, ones };
  Kind kind = Kind::zeros;
  double scale = 0.0;
};

// Fills rows [row_begin, row_begin + rows) of the parameter of `full_shape`
// (a row is one index of dim 0; a 0-d parameter has one row of one element)
// into `out`, which holds rows * (elements per row) floats. Rows at or past
// full_shape[0] are the last shard's padding and get 0, as shard_rows()
// (passes/fsdp.h) lays them out. The generator is SplitMix64 over the
// counter "global element index" with key derive(seed, hash(param_path)),
// Box–Muller for normal.
void init_shard(float* out, const Shape& full_shape, int64_t row_begin, int64_t rows, const ParamInit& init,
                uint64_t seed, std::string_view param_path);

// init_shard for tp rank `tp_rank`'s part of a parameter tensor parallelism
// cut by `split` (passes/tensor_parallel_plan.h; its path names the stream): fills
// rows [row_begin, row_begin + rows) of the part (tensor_parallel_part_shape;
// rows past its dim 0 are padding, 0) with the values the full parameter
// holds at those places, so the parts of every tp rank put back together are
// the unsharded initialisation; a padded vocabulary's padding rows are 0.
void init_tp_shard(float* out, const Shape& full_shape, const TensorParallelSplit& split, int tp, int tp_rank,
                   int64_t row_begin, int64_t rows, const ParamInit& init, uint64_t seed);

}  // namespace fsdpc
