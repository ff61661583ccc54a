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

void init_tp_shard(float* out, const Shape& full_shape, const TensorParallelSplit& split, int tp, int tp_rank,
                   int64_t row_begin, int64_t rows, const ParamInit& init, uint64_t seed) {
  FSDPC_CHECK(row_begin >= 0 && rows >= 0) << "init_tp_shard: rows [" << row_begin << ", +" << rows << ")";
  if (init.scale < 0 || !(init.scale == init.scale))
    fail("init of '", split.param_path, "': scale must be a non-negative number, got ", init.scale);
  const std::vector<TensorParallelRun> runs = tensor_parallel_runs(split, full_shape, tp, tp_rank);
  const Shape local = tensor_parallel_part_shape(split, full_shape, tp);
  int64_t row = 1;  // elements per index of the part's dim 0
  for (size_t i = 1; i < local.size(); ++i) row *= local[i];
  const int64_t real_end = std::max(row_begin, std::min(row_begin + rows, local.empty() ? 1 : local[0]));
  // The part's elements [lo, hi) are this shard's real rows; each run fills
  // what of them it holds, from the full parameter's stream.
  const int64_t lo = row_begin * row, hi = real_end * row;
  const uint64_t key = derive_key(seed, hash_string(split.param_path));
  // A padded vocabulary's padding rows, which no run covers, are 0.
  if (split.pad) std::fill(out, out + (hi - lo), 0.0f);
  for (const TensorParallelRun& r : runs) {
    const int64_t a = std::max(lo, r.part), b = std::min(hi, r.part + r.count);
    if (a < b) fill_parallel(out + (a - lo), r.full + (a - r.part), r.full + (b - r.part), init, key);
  }
  std::fill(out + (hi - lo), out + rows * row, 0.0f);
}

}  // namespace fsdpc
