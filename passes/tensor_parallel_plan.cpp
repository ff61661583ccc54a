// Applying a tp plan, and the layout of a tp rank's part
// (passes/tensor_parallel_plan.h). The plans themselves are the model
// families' (frontend/models/<family>/).
#include "passes/tensor_parallel_plan.h"

#include <algorithm>

#include "ir/error.h"

namespace fsdpc {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::optional<TensorParallelSplit> TensorParallelPlan::split(const std::string& path, const Shape& full,
                                                            int tp) const {
  for (const TensorParallelRule& r : rules) {
    if (!(path == r.pattern || ends_with(path, "." + r.pattern))) continue;
    switch (r.kind) {
      case TensorParallelRule::Kind::vocab:
        // Rows of a [vocab, hidden] table; padded when T does not divide them.
        if (tp > 1 && full.size() == 2) return TensorParallelSplit{path, 0, 1, full[0] % tp != 0};
        return std::nullopt;
      case TensorParallelRule::Kind::column:
      case TensorParallelRule::Kind::row:
        return TensorParallelSplit{path, r.dim, r.blocks};
    }
  }
  return std::nullopt;
}

std::vector<TensorParallelSplit> TensorParallelPlan::splits(const Trace& captured, int tp) const {
  std::vector<TensorParallelSplit> out;
  for (const Proxy& p : captured.args)
    if (p.is_param())
      if (auto s = split(p.param_path, p.type.shape, tp)) out.push_back(*s);
  return out;
}

namespace {

// The split dim's size n and the entries of each part on it: n / T, or
// ceil(n / T) when padded. Fails for a cut the shape cannot take.
int64_t part_extent(const TensorParallelSplit& split, const Shape& full, int tp, int rank) {
  if (split.dim < 0 || split.dim >= static_cast<int64_t>(full.size()))
    fail("tensor_parallel_part: ", split.param_path, " has no dim ", split.dim);
  const int64_t n = full[split.dim];
  const bool cuts = split.pad ? split.blocks == 1 && n > 0 : n % (split.blocks * tp) == 0;
  if (tp < 1 || rank < 0 || rank >= tp || split.blocks < 1 || !cuts)
    fail("tensor_parallel_part: ", split.param_path, " of shape ", shape_str(full), " cannot be cut into ", tp,
         split.pad ? " padded" : "", " parts on dim ", split.dim, " in ", split.blocks, " blocks (rank ", rank, ")");
  return split.pad ? (n + tp - 1) / tp : n / tp;
}

}  // namespace

Shape tensor_parallel_part_shape(const TensorParallelSplit& split, const Shape& full, int tp) {
  Shape part = full;
  part[split.dim] = part_extent(split, full, tp, 0);
  return part;
}

std::vector<TensorParallelRun> tensor_parallel_runs(const TensorParallelSplit& split, const std::vector<int64_t>& full,
                                                    int tp, int rank) {
  const int64_t extent = part_extent(split, full, tp, rank);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < split.dim; ++i) outer *= full[i];
  for (size_t i = split.dim + 1; i < full.size(); ++i) inner *= full[i];
  const int64_t n = full[split.dim];
  std::vector<TensorParallelRun> runs;
  if (split.pad) {
    // The full entries [rank * extent, n) this part holds, then padding: the
    // last parts may hold fewer, or none (a rank of padding only).
    const int64_t real = std::clamp<int64_t>(n - rank * extent, 0, extent);
    if (real > 0)
      for (int64_t o = 0; o < outer; ++o)
        runs.push_back({o * extent * inner, (o * n + rank * extent) * inner, real * inner});
    return runs;
  }
  const int64_t block = n / split.blocks, chunk = block / tp;
  runs.reserve(static_cast<size_t>(outer * split.blocks));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t b = 0; b < split.blocks; ++b)
      runs.push_back({(o * split.blocks + b) * chunk * inner, (o * n + b * block + rank * chunk) * inner, chunk * inner});
  return runs;
}

std::vector<double> tensor_parallel_part(const TensorParallelSplit& split, const std::vector<int64_t>& full,
                                         const std::vector<double>& data, int tp, int rank) {
  const std::vector<TensorParallelRun> runs = tensor_parallel_runs(split, full, tp, rank);
  if (static_cast<int64_t>(data.size()) != numel(full))
    fail("tensor_parallel_part: ", split.param_path, " of shape ", shape_str(full), " given ", data.size(),
         " values");
  std::vector<double> out(static_cast<size_t>(numel(tensor_parallel_part_shape(split, full, tp))), 0.0);
  for (const TensorParallelRun& r : runs) std::copy_n(data.begin() + r.full, r.count, out.begin() + r.part);
  return out;
}

}  // namespace fsdpc
