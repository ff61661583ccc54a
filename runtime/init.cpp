// Shard-local, rank-independent parameter initialisation (see runtime/init.h).
#include "runtime/init.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "executors/cpu/cpu_executor.h"

#include "ir/error.h"
#include "runtime/random.h"

namespace fsdpc {

namespace {
// Fills global elements [begin, end) of the parameter's stream.
void fill_elements(float* out, int64_t begin, int64_t end, const ParamInit& init, uint64_t key) {
  switch (init.kind) {
    case ParamInit::Kind::zeros:
      std::fill(out, out + (end - begin), 0.0f);
      return;
    case ParamInit::Kind::ones:
      std::fill(out, out + (end - begin), 1.0f);
      return;
    case ParamInit::Kind::normal:
      fill_normal(key, begin, end, init.scale, out);
      return;
    case ParamInit::Kind::uniform:
      for (int64_t i = begin; i < end; ++i) {
        double u = uniform01(random_bits(key, static_cast<uint64_t>(i)));
        out[i - begin] = static_cast<float>((2.0 * u - 1.0) * init.scale);
      }
      return;
  }
  FSDPC_CHECK(false) << "unknown init kind " << static_cast<int>(init.kind);
}
// Every element is a function of its global index alone (counter-based), so
// contiguous slices filled on separate threads give the very values one
// thread gives. Slices start at even indices, so no Box–Muller pair is split.
// Below kParallelMin elements a thread costs more than it saves.
void fill_parallel(float* out, int64_t begin, int64_t end, const ParamInit& init, uint64_t key) {
  constexpr int64_t kParallelMin = int64_t{1} << 16;
  const int64_t n = end - begin;
  const int threads = n >= kParallelMin ? static_cast<int>(std::min<int64_t>(cpu_threads(), n / kParallelMin)) : 1;
  if (threads <= 1) return fill_elements(out, begin, end, init, key);
  const int64_t chunk = ((n + threads - 1) / threads + 1) / 2 * 2;
  auto slice = [&](int t) {
    const int64_t b = std::min(end, begin + t * chunk), e = std::min(end, b + chunk);
    if (b < e) fill_elements(out + (b - begin), b, e, init, key);
  };
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(threads - 1));
  for (int t = 1; t < threads; ++t) workers.emplace_back(slice, t);
  slice(0);
  for (std::thread& w : workers) w.join();
}
}  // namespace

void init_shard(float* out, const Shape& full_shape, int64_t row_begin, int64_t rows, const ParamInit& init,
                uint64_t seed, std::string_view param_path) {
  FSDPC_CHECK(row_begin >= 0 && rows >= 0) << "init_shard: rows [" << row_begin << ", +" << rows << ")";
  if (init.scale < 0 || !(init.scale == init.scale))
    fail("init of '", param_path, "': scale must be a non-negative number, got ", init.scale);
  int64_t d0 = full_shape.empty() ? 1 : full_shape[0];
  int64_t row_size = 1;
  for (size_t i = 1; i < full_shape.size(); ++i) row_size *= full_shape[i];
  // Real rows first, then padding: only the rows below d0 exist in the
  // unsharded parameter.
  int64_t real_end = std::max(row_begin, std::min(row_begin + rows, d0));
  int64_t real_rows = real_end - row_begin;
  uint64_t key = derive_key(seed, hash_string(param_path));
  fill_parallel(out, row_begin * row_size, real_end * row_size, init, key);
  std::fill(out + real_rows * row_size, out + rows * row_size, 0.0f);
}

void init_tp_shard(float* out, const Shape& full_shape, const TpPart& part, int64_t row_begin, int64_t rows,
                   const ParamInit& init, uint64_t seed, std::string_view param_path) {
  FSDPC_CHECK(row_begin >= 0 && rows >= 0) << "init_tp_shard: rows [" << row_begin << ", +" << rows << ")";
  const int64_t rank_dims = static_cast<int64_t>(full_shape.size());
  FSDPC_CHECK(part.tp >= 1 && part.tp_rank >= 0 && part.tp_rank < part.tp && part.blocks >= 1 && part.dim >= 0 &&
              part.dim < rank_dims && full_shape[part.dim] % (part.blocks * part.tp) == 0)
      << "init_tp_shard: " << param_path << " cannot be cut " << part.blocks << " x " << part.tp << " on dim "
      << part.dim;
  if (init.scale < 0 || !(init.scale == init.scale))
    fail("init of '", param_path, "': scale must be a non-negative number, got ", init.scale);
  Shape local = full_shape;
  local[part.dim] /= part.tp;
  const int64_t chunk = local[part.dim] / part.blocks;  // indices of dim per block on this rank
  int64_t inner = 1;                                     // elements per index of dim
  for (int64_t i = part.dim + 1; i < rank_dims; ++i) inner *= full_shape[i];
  int64_t full_row = 1, local_row = 1;  // elements per index of dim 0
  for (int64_t i = 1; i < rank_dims; ++i) {
    full_row *= full_shape[i];
    local_row *= local[i];
  }
  const uint64_t key = derive_key(seed, hash_string(param_path));
  const int64_t real_end = std::max(row_begin, std::min(row_begin + rows, local[0]));
  for (int64_t r = row_begin; r < real_end; ++r) {
    float* row_out = out + (r - row_begin) * local_row;
    if (part.dim == 0) {  // a whole row of the full parameter
      const int64_t full_r = (r / chunk * part.tp + part.tp_rank) * chunk + r % chunk;
      fill_parallel(row_out, full_r * full_row, (full_r + 1) * full_row, init, key);
      continue;
    }
    // Within the row, each index of the dims between 0 and `dim` holds
    // `blocks` runs of chunk * inner contiguous elements.
    const int64_t outer = full_row / (full_shape[part.dim] * inner);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t b = 0; b < part.blocks; ++b) {
        const int64_t from = r * full_row + o * full_shape[part.dim] * inner +
                             (b * part.tp + part.tp_rank) * chunk * inner;
        fill_parallel(row_out + o * local[part.dim] * inner + b * chunk * inner, from, from + chunk * inner, init,
                      key);
      }
  }
  std::fill(out + (real_end - row_begin) * local_row, out + rows * local_row, 0.0f);
}

}  // namespace fsdpc
