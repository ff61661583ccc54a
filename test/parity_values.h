// Values for the parity tests on the float64 reference executor
// (sharding_parity_test, tensor_parallel_test): random inputs, a rank's rows
// of a value (an FSDP shard or a data-parallel batch), and the relative error
// every parity check holds to 1e-12.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>

#include "executors/reference/reference.h"

namespace fsdpc::test {

// Normal(0, scale) values of type t (distribution none), or integers in
// [0, int_bound) when int_bound > 0 (token ids).
inline reference::Value random_value(const TensorType& t, std::mt19937& rng, double scale, int64_t int_bound = 0) {
  reference::Value v{t, std::vector<double>(static_cast<size_t>(numel(t.shape)))};
  v.type.dist = DistType::none;
  std::normal_distribution<double> normal(0.0, scale);
  std::uniform_int_distribution<int64_t> ints(0, std::max<int64_t>(int_bound - 1, 0));
  for (double& x : v.data) x = int_bound ? static_cast<double>(ints(rng)) : normal(rng);
  return v;
}

// Rows [begin, end) of dim 0, zero-padded past the end of `v`.
inline reference::Value rows(const reference::Value& v, int64_t begin, int64_t end) {
  const int64_t row = v.type.shape.empty() ? 1 : numel(v.type.shape) / v.type.shape[0];
  reference::Value out = v;
  out.type.shape[0] = end - begin;
  out.data.assign(static_cast<size_t>((end - begin) * row), 0.0);
  for (int64_t r = begin; r < std::min(end, v.type.shape[0]); ++r)
    std::copy_n(v.data.begin() + r * row, row, out.data.begin() + (r - begin) * row);
  return out;
}

// The largest |got - want| / (1e-3 + |want|) over the elements: relative,
// with an absolute floor for values near zero.
inline double worst_relative_error(const reference::Value& got, const reference::Value& want) {
  double worst = 0;
  for (size_t k = 0; k < got.data.size() && k < want.data.size(); ++k)
    worst = std::max(worst, std::abs(got.data[k] - want.data[k]) / (1e-3 + std::abs(want.data[k])));
  return worst;
}

}  // namespace fsdpc::test
