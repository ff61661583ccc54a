// Host-side plan of a GPU reduction (reduce_plan.h).
#include "executors/cuda/reduce_plan.h"

#include <algorithm>

#include "ir/error.h"

namespace fsdpc::cuda {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A maximal run of adjacent dims that are all kept or all reduced.
struct Run {
  bool reduced;
  int64_t size, stride;
};

// The chunk for a first pass of `tasks` blocks over `reduced` elements each:
// whole when the blocks already fill the GPU or the reduction is short;
// else cut toward kTargetBlocks blocks, no chunk shorter than `min_chunk`.
int64_t chunk_for(int64_t tasks, int64_t reduced, int64_t min_chunk) {
  if (tasks >= kTargetBlocks / 2 || reduced < 2 * min_chunk) return reduced;
  const int64_t chunks = std::min(ceil_div(kTargetBlocks, tasks), reduced / min_chunk);  // >= 2
  return ceil_div(reduced, chunks);
}

void push_run(const std::string& what, StridedDims& d, const Run& r) {
  if (d.rank == kMaxStridedDims)
    fail(what, ": the reduced dims leave more than ", kMaxStridedDims,
         " separate runs of kept or reduced dims; reshape or permute the input first");
  d.size[d.rank] = r.size;
  d.stride[d.rank] = r.stride;
  ++d.rank;
}

}  // namespace

int64_t ReducePlan::chunks() const {
  if (chunk <= 0 || reduced <= chunk) return 1;
  return ceil_div(reduced, chunk);
}

int64_t ReducePlan::partials() const {
  const int64_t c = chunks();
  return c > 1 ? outer * c * inner : 0;
}

ReducePlan plan_reduce(const std::vector<int64_t>& shape, const std::vector<int64_t>& dims, const std::string& what) {
  const auto rank = static_cast<int64_t>(shape.size());
  std::vector<bool> is_reduced(shape.size(), false);
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] < 0 || dims[k] >= rank || (k > 0 && dims[k] <= dims[k - 1]))
      fail(what, ": dims must be strictly increasing and in [0, ", rank, "); got dim ", dims[k]);
    is_reduced[dims[k]] = true;
  }
  ReducePlan plan;
  int64_t n_out = 1, n_reduced = 1;
  for (size_t i = 0; i < shape.size(); ++i) (is_reduced[i] ? n_reduced : n_out) *= shape[i];
  if (n_out == 0) return plan;
  plan.outer = n_out;
  plan.reduced = n_reduced;
  plan.chunk = n_reduced;
  if (n_reduced <= 1) {  // over an empty extent (the identity) or over size-1 dims (a copy)
    plan.layout = ReduceLayout::threads;
    return plan;
  }

  std::vector<Run> runs;  // outermost first
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!runs.empty() && runs.back().reduced == is_reduced[i])
      runs.back().size *= shape[i];
    else
      runs.push_back(Run{is_reduced[i], shape[i], 0});
  }
  int64_t stride = 1;
  for (auto r = runs.rbegin(); r != runs.rend(); ++r) {
    r->stride = stride;
    stride *= r->size;
  }

  const auto n_reduced_runs = std::count_if(runs.begin(), runs.end(), [](const Run& r) { return r.reduced; });
  if (n_reduced_runs == 1) {
    const auto at = std::find_if(runs.begin(), runs.end(), [](const Run& r) { return r.reduced; });
    plan.outer = 1;
    for (auto r = runs.begin(); r != at; ++r) plan.outer *= r->size;
    plan.inner = n_out / plan.outer;
    if (n_reduced <= kShortReduction) {
      plan.layout = ReduceLayout::threads;
    } else if (plan.inner == 1) {
      plan.layout = ReduceLayout::rows;
      plan.chunk = chunk_for(plan.outer, n_reduced, kRowChunkMin);
    } else {
      plan.layout = ReduceLayout::columns;
      plan.chunk = chunk_for(plan.outer * ceil_div(plan.inner, 32), n_reduced, kColumnChunkMin);
    }
    return plan;
  }
  // Two or more reduced runs (n_reduced > 1: at least one).
  plan.layout = ReduceLayout::strided;
  for (const Run& r : runs) push_run(what, r.reduced ? plan.reduced_dims : plan.kept, r);
  plan.chunk = chunk_for(n_out, n_reduced, kRowChunkMin);
  return plan;
}

int64_t strided_offset(const StridedDims& d, int64_t k) {
  int64_t offset = 0;
  for (int i = d.rank - 1; i >= 0; --i) {
    offset += (k % d.size[i]) * d.stride[i];
    k /= d.size[i];
  }
  return offset;
}

}  // namespace fsdpc::cuda
