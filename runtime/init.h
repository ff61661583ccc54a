// Parameter initialisation where each rank materialises only its own shard:
// every element is a pure function of (seed, parameter path, global index),
// so the ranks' shards concatenate to the unsharded initialisation for any
// world size, and no rank ever holds the full parameter.
#pragma once

#include <cstdint>
#include <string_view>

#include "ir/types.h"

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

// How tensor parallelism cut a parameter (passes/tensor_parallel.h's
// TensorParallelSplit): dim `dim` of the full shape is `blocks` equal blocks,
// each cut into `tp` chunks, and tp rank `tp_rank` holds chunk tp_rank of
// every block.
struct TpPart {
  int64_t dim = 0;
  int64_t blocks = 1;
  int tp = 1;
  int tp_rank = 0;
};

// init_shard for a tensor-parallel rank's part: fills rows [row_begin,
// row_begin + rows) of the part (full_shape with dim `part.dim` divided by
// part.tp; rows past its dim 0 are padding, 0) with the values the full
// parameter holds at those places, so the parts of every tp rank put back
// together are the unsharded initialisation.
void init_tp_shard(float* out, const Shape& full_shape, const TpPart& part, int64_t row_begin, int64_t rows,
                   const ParamInit& init, uint64_t seed, std::string_view param_path);

}  // namespace fsdpc
