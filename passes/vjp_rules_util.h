// Private to passes/vjp_rules*.cpp: the view of one statement being
// differentiated, small emit helpers the rules share, and the per-family
// rule tables that vjp() dispatches to.
#pragma once

#include <string>
#include <vector>

#include "passes/vjp_rules.h"

namespace fsdpc::vjp_detail {

// One statement being differentiated: its forward inputs and outputs and the
// cotangents flowing into it.
struct VjpCall {
  TraceBuilder& b;
  const BoundSymbol& bsym;
  const Cotangents& out_cts;
  const std::vector<bool>& needs;

  size_t arity() const { return bsym.inputs.size(); }
  bool is_scalar(size_t i) const { return bsym.inputs[i].is_scalar(); }
  double scalar(size_t i) const { return *bsym.inputs[i].scalar; }
  // Forward input i as a proxy (name and type); i must be a tensor input.
  Proxy in(size_t i) const;
  const Proxy& out() const { return bsym.output(); }
  // The cotangent of the single output; set whenever a rule runs.
  const Proxy& g() const;
  bool need(size_t i) const { return i < needs.size() && needs[i] && !is_scalar(i); }
  Cotangents none() const { return Cotangents(arity()); }
};

// Family tables; each handles the ops of its file.
Cotangents vjp_elementwise(const VjpCall& c);  // vjp_rules_elementwise.cpp
Cotangents vjp_shape(const VjpCall& c);        // vjp_rules_shape.cpp (+ indexing, matmul)
Cotangents vjp_nn(const VjpCall& c);           // vjp_rules_nn.cpp (composites)
Cotangents vjp_distributed(const VjpCall& c);  // vjp_rules_distributed.cpp

// ---- emit helpers (vjp_rules.cpp) ----
Operand op(const Proxy& p);
Proxy unary(TraceBuilder& b, OpId id, const Proxy& x);
Proxy binary(TraceBuilder& b, OpId id, const Proxy& x, const Proxy& y);
Proxy binary(TraceBuilder& b, OpId id, const Proxy& x, double y);
Proxy binary(TraceBuilder& b, OpId id, double x, const Proxy& y);
Proxy where(TraceBuilder& b, const Proxy& cond, const Operand& x, const Operand& y);
// sum over `dims`; x itself when dims is empty.
Proxy sum(TraceBuilder& b, const Proxy& x, IntList dims);
Proxy broadcast(TraceBuilder& b, const Proxy& x, const Shape& shape, IntList broadcast_dims);
// Broadcasts a value reduced over `dims` back to `full` (the inverse of sum).
Proxy broadcast_back(TraceBuilder& b, const Proxy& reduced, const Shape& full,
                     const IntList& dims);
// reshape; x itself when the shape already fits.
Proxy reshape(TraceBuilder& b, const Proxy& x, const Shape& shape);
Proxy permute(TraceBuilder& b, const Proxy& x, IntList dims);
Proxy convert(TraceBuilder& b, const Proxy& x, DType dtype);
Proxy zeros(TraceBuilder& b, const TensorType& like);
// iota(n) + first: the n consecutive i64 indices from `first`, an i64 scalar
// on their device (a rank's first row, position or class: its place in a
// group times n), to take the rank's own chunk along a dim.
Proxy indices_from(TraceBuilder& b, const Proxy& first, int64_t n);
Proxy matmul(TraceBuilder& b, const Proxy& x, const Proxy& y);
// The cotangent of broadcast_in_dim's input: sums g over the dims the
// broadcast added or stretched from size 1, then reshapes to `x_shape`.
Proxy unbroadcast(TraceBuilder& b, const Proxy& g, const Shape& x_shape, const IntList& bdims);

int64_t rank(const Proxy& p);
IntList range(int64_t n);             // [0, 1, ..., n-1]
IntList swap_last_two(int64_t rank);  // the permutation that transposes a matrix stack
Attrs group_attrs(const std::string& group, int64_t size);

}  // namespace fsdpc::vjp_detail
