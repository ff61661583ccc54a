// Single-collective traces (x -> op(x) -> wait on a group "dp" of 2) shared by
// the NCCL executor's host-side test and its GPU test, so both exercise the
// same statements.
#pragma once

#include <utility>

#include "ir/builder.h"

namespace fsdpc::test {

inline TensorType tensor_on(Shape shape, DType d, DeviceKind kind) {
  TensorType t;
  t.shape = std::move(shape);
  t.dtype = d;
  t.device = Device{kind, 0};
  return t;
}

// The attributes each collective needs on a group of 2 ("dp"), sums where an
// op reduces; none for other ops.
inline Attrs collective_attrs(OpId op) {
  switch (op) {
    case OpId::AllGather: return {{"group", "dp"}, {"size", int64_t{2}}, {"dim", int64_t{0}}};
    case OpId::ReduceScatter:
      return {{"group", "dp"}, {"size", int64_t{2}}, {"dim", int64_t{0}}, {"op", "sum"}};
    case OpId::AllReduce: return {{"group", "dp"}, {"size", int64_t{2}}, {"op", "sum"}};
    case OpId::Broadcast: return {{"group", "dp"}, {"size", int64_t{2}}, {"root", int64_t{0}}};
    default: return {};
  }
}

// x -> op(x) -> wait, built (and meta-checked) by the TraceBuilder.
inline Trace collective_trace(OpId op, const TensorType& x, Attrs attrs) {
  Trace t;
  TraceBuilder tb(t);
  tb.add_arg(Proxy{"x", x, "", true});
  const Proxy f = tb.emit1(op, {Operand::of("x")}, std::move(attrs));
  const Proxy w = tb.emit1(OpId::Wait, {Operand::of(f.name)});
  t.returns = ReturnTree::tuple({ReturnTree::leaf(w.name)});
  return t;
}

}  // namespace fsdpc::test
