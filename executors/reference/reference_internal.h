// Private to executors/reference/: what the interpreter loop, the per-op
// kernels, the direct composites and the simulated collectives share.
#pragma once

#include <cmath>
#include <string>
#include <unordered_map>
#include <vector>

#include "executors/reference/reference.h"
#include "executors/strided.h"
#include "ir/error.h"

namespace fsdpc::reference {

using Data = std::vector<double>;

// One rank's live values by name.
using Env = std::unordered_map<std::string, Value>;

// The value `name` in `env`; a missing one is a broken invariant (the
// verifier rules out use before definition and use after del).
const Value& lookup(const Env& env, const std::string& name);

// An input of a bound symbol: a tensor value, or a scalar literal.
struct Input {
  const Value* value = nullptr;
  double scalar = 0.0;
  bool is_scalar() const { return value == nullptr; }
};

// A float64 result held as dtype `d`: integers truncate toward zero (as C++
// and PyTorch's conversions do), bools become 0/1; floats stay float64
// because this is the oracle, not a model of f32/bf16 rounding.
inline double to_dtype(double x, DType d) {
  if (d == DType::boolean) return x != 0.0 ? 1.0 : 0.0;
  if (is_integer(d)) return std::trunc(x);
  return x;
}


// Calls f(a_offset, b_offset) for every index of `shape` in row-major order,
// the offsets being a0 + sum(index[i] * sa[i]) and likewise for b. Strides of
// 0 broadcast; permuted strides transpose. Every data-movement op is one call.
template <class F>
void walk2(const Shape& shape, const Strides& sa, int64_t a0, const Strides& sb, int64_t b0,
           F&& f) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (numel(shape) == 0) return;
  if (rank == 0) {
    f(a0, b0);
    return;
  }
  std::vector<int64_t> index(rank, 0);
  const int64_t n = shape[rank - 1], la = sa[rank - 1], lb = sb[rank - 1];
  int64_t a = a0, b = b0;
  while (true) {
    for (int64_t i = 0; i < n; ++i) f(a + i * la, b + i * lb);
    int64_t d = rank - 2;  // odometer carry over the outer dims
    for (; d >= 0; --d) {
      a += sa[d];
      b += sb[d];
      if (++index[d] < shape[d]) break;
      a -= sa[d] * shape[d];
      b -= sb[d] * shape[d];
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

// Prims other than collectives and unpack (reference_kernels.cpp,
// reference_shape.cpp); `out` is the output proxy's type.
Data run_prim(const BoundSymbol& b, const std::vector<Input>& in, const TensorType& out);
Data run_shape_op(const BoundSymbol& b, const std::vector<Input>& in, const TensorType& out);
std::vector<Data> run_unpack(const BoundSymbol& b, const Value& buf);

// quantize and dequantize (reference_quantize.cpp), ir/quantize.h's format.
Data quantize(const BoundSymbol& b, const Value& x);
Data dequantize(const BoundSymbol& b, const Value& q, const TensorType& out);

// A composite computed directly, for one recorded without its decomposition
// (reference_composites.cpp): one result per output.
std::vector<Data> run_composite(const BoundSymbol& b, const std::vector<Input>& in);

// Ops that combine values across ranks (reference_collectives.cpp).
bool is_cross_rank(OpId op);
// Runs collective `b` on every rank at once; envs[r] is rank r's values.
void run_collective(const BoundSymbol& b, const Mesh& mesh, std::vector<Env>& envs);

// send and recv: messages between runs of different traces, through a
// Mailbox (reference_point_to_point.cpp).
bool is_point_to_point(OpId op);
// Runs `b` on every rank; `mailbox` may be null (then it throws).
void run_point_to_point(const BoundSymbol& b, Mailbox* mailbox, std::vector<Env>& envs);

}  // namespace fsdpc::reference
