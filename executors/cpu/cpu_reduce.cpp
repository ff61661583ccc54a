// sum and amax over `dims`. The input is walked once in memory order: dims
// are coalesced into runs, and each innermost run is either folded into one
// output (a row sum) or added element by element into a row of outputs (a
// column sum), both loops the compiler vectorises. f32 sums accumulate in
// double so long reductions stay within f32 rounding of the exact result.
// Large inputs split over the rank's threads by outputs (rows or columns).
#include <algorithm>
#include <limits>

#include "executors/cpu/cpu_kernels.h"

namespace fsdpc::cpu {

namespace {

// The input's dims with output strides (0 on reduced dims), coalesced.
std::vector<Dim> coalesced_dims(const Shape& shape, const IntList& reduced, const Shape& out_shape) {
  const Strides xs = row_major_strides(shape), os = row_major_strides(out_shape);
  std::vector<Dim> dims;
  size_t next = 0, kept = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    const bool is_reduced = next < reduced.size() && reduced[next] == static_cast<int64_t>(i);
    push_coalesced(dims, Dim{shape[i], xs[i], is_reduced ? 0 : os[kept]});
    if (is_reduced)
      ++next;
    else
      ++kept;
  }
  return dims;
}

// Calls run(src_offset, dst_offset) for each innermost run of `dims`.
template <class F>
void for_each_run(const std::vector<Dim>& dims, F&& run) {
  for_each_outer(dims, dims.empty() ? 0 : dims.size() - 1, run);
}

// Folds a row into `a` through eight independent lanes: a serial chain of
// dependent adds runs at one element per add latency and does not vectorise
// (no reassociation without -ffast-math); the lanes do, and sum pairwise-ish.
template <class Acc, class Fold>
Acc fold_row(const float* p, int64_t n, Acc a, Acc identity, Fold fold) {
  constexpr int kLanes = 8;
  Acc lane[kLanes];
  for (Acc& l : lane) l = identity;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] = fold(lane[j], p[i + j]);
  for (; i < n; ++i) lane[0] = fold(lane[0], p[i]);
  for (Acc l : lane) a = fold(a, l);
  return a;
}

// Folds x into acc (one accumulator per output): Fold is sum or max.
template <class Acc, class Fold>
void reduce_serial(const float* x, const std::vector<Dim>& dims, Acc* acc, Acc identity, Fold fold) {
  if (dims.empty()) {
    acc[0] = fold(acc[0], x[0]);
    return;
  }
  const Dim last = dims.back();
  if (last.dst == 0) {  // innermost dim reduced: a row into one output
    for_each_run(dims, [&](int64_t s, int64_t o) { acc[o] = fold_row(x + s, last.size, acc[o], identity, fold); });
  } else {  // innermost dim kept: a row into a row of outputs
    for_each_run(dims, [&](int64_t s, int64_t o) {
      const float* p = x + s;
      Acc* q = acc + o;
      for (int64_t i = 0; i < last.size; ++i) q[i] = fold(q[i], p[i]);
    });
  }
}

// reduce_serial split over the rank's threads by outputs, never inside one
// output's fold: every output sees the same values in the same order, so
// the result does not depend on the thread count.
template <class Acc, class Fold>
void reduce_into(const float* x, const std::vector<Dim>& dims, Acc* acc, Acc identity, Fold fold) {
  int64_t total = 1;
  for (const Dim& d : dims) total *= d.size;
  const int threads = cpu_threads();
  if (dims.empty() || total < kParallelMin || threads == 1) return reduce_serial(x, dims, acc, identity, fold);
  const Dim first = dims.front(), last = dims.back();
  if (dims.size() >= 2 && first.dst != 0) {
    // The outermost dim is kept: its entries own disjoint outputs (row sums).
    const std::vector<Dim> inner(dims.begin() + 1, dims.end());
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < first.size; ++i)
      reduce_serial(x + i * first.src, inner, acc + i * first.dst, identity, fold);
    return;
  }
  if (last.dst != 0) {
    // The innermost dim is kept (column sums): threads take column ranges.
    const int64_t chunk = (last.size + threads - 1) / threads;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int t = 0; t < threads; ++t) {
      const int64_t lo = std::min(last.size, t * chunk), hi = std::min(last.size, lo + chunk);
      for_each_run(dims, [&](int64_t s, int64_t o) {
        const float* p = x + s;
        Acc* q = acc + o;
        for (int64_t i = lo; i < hi; ++i) q[i] = fold(q[i], p[i]);
      });
    }
    return;
  }
  reduce_serial(x, dims, acc, identity, fold);
}

}  // namespace

FSDPC_CPU_KERNEL(reduce_kernel) {
  require_f32(b, in[0], "x");
  const int64_t n_out = count_of(out[0]);
  if (n_out == 0) return;
  float* y = mdata<float>(out[0]);
  const bool empty_input = count_of(in[0]) == 0;
  const std::vector<Dim> dims =
      coalesced_dims(shape_of(in[0]), b.attrs.get_ints("dims"), shape_of(out[0]));
  if (b.op == OpId::Sum) {
    std::vector<double> acc(n_out, 0.0);
    if (!empty_input)
      reduce_into(cdata<float>(in[0]), dims, acc.data(), 0.0, [](auto a, auto v) { return a + v; });
    for (int64_t i = 0; i < n_out; ++i) y[i] = static_cast<float>(acc[i]);
    return;
  }
  // amax over nothing is -inf, the identity of max; NaN wins, as the reference
  // (bitwise | keeps the select branch-free, so it vectorises).
  constexpr float kLowest = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n_out; ++i) y[i] = kLowest;
  if (!empty_input)
    reduce_into(cdata<float>(in[0]), dims, y, kLowest,
                [](float a, float v) { return ((v > a) | (v != v)) ? v : a; });
}

}  // namespace fsdpc::cpu
