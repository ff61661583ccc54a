// What the NCCL executor does for a gather or reduce-scatter along any dim,
// emulated on host buffers with its staging plans (nccl_staging.h): shared
// by the CPU check against the MPI executor (test/nccl_staging_test.cpp) and
// the GPU run on 2 ranks (test/gpu/gpu_nccl_dim_test.cpp), over the same cases.
#pragma once

#include <cstdint>
#include <vector>

#include "executors/comm/nccl_staging.h"
#include "ir/ops.h"
#include "ir/types.h"

namespace fsdpc::test {

using Floats = std::vector<float>;

inline int64_t prod(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

// Member k's input: distinct, exactly summable values.
inline Floats input_of(int k, int64_t n) {
  Floats x(static_cast<size_t>(n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(1000 * k + static_cast<int64_t>(i));
  return x;
}

// all_gather of each member's `shape` along `dim` as the NCCL executor does it.
inline Floats nccl_all_gather(const std::vector<Floats>& xs, const Shape& shape, size_t dim) {
  Floats staged;  // what ncclAllGather writes: member blocks back to back
  for (const Floats& x : xs) staged.insert(staged.end(), x.begin(), x.end());
  const int64_t outer = prod(shape, 0, dim);
  if (outer <= 1) return staged;  // gathered straight into the result
  Floats out(staged.size(), -1.0f);
  const int64_t inner_bytes = prod(shape, dim, shape.size()) * int64_t{sizeof(float)};
  apply_on_host(gather_unpack_plan(outer, inner_bytes, static_cast<int>(xs.size())), out.data(), staged.data());
  return out;
}

// reduce_scatter of each member's `shape` along `dim`: member `rank`'s part.
inline Floats nccl_reduce_scatter(const std::vector<Floats>& xs, const Shape& shape, size_t dim, int rank) {
  const int members = static_cast<int>(xs.size());
  const int64_t n = prod(shape, 0, shape.size()), part = n / members, outer = prod(shape, 0, dim);
  Floats sum(static_cast<size_t>(n), 0.0f);
  for (const Floats& x : xs) {
    Floats send = x;
    if (outer > 1 && members > 1)
      apply_on_host(scatter_pack_plan(outer, part / outer * int64_t{sizeof(float)}, members), send.data(), x.data());
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += send[i];
  }
  return Floats(sum.begin() + rank * part, sum.begin() + (rank + 1) * part);
}

// The cases both paths run on 2 ranks: (op, shape of one rank's input, dim).
struct StagedCase {
  OpId op;
  Shape shape;
  int64_t dim;
};
inline const StagedCase kStagedCases[] = {
    {OpId::AllGather, {3, 4, 2}, 0},     {OpId::AllGather, {3, 4, 2}, 1},
    {OpId::AllGather, {3, 4, 2}, 2},     {OpId::ReduceScatter, {4, 6, 2}, 0},
    {OpId::ReduceScatter, {4, 6, 2}, 1}, {OpId::ReduceScatter, {4, 6, 2}, 2},
};

}  // namespace fsdpc::test
