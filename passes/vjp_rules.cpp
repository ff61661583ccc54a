// vjp(): dispatch to the rule families, plus the emit helpers they share.
// Rules live in vjp_rules_{elementwise,shape,nn,distributed}.cpp.
#include "passes/vjp_rules.h"

#include "ir/error.h"
#include "passes/vjp_rules_util.h"

namespace fsdpc {

namespace vjp_detail {

Proxy VjpCall::in(size_t i) const {
  FSDPC_CHECK(i < bsym.inputs.size() && !bsym.inputs[i].is_scalar())
      << op_name(bsym.op) << ": tensor input " << i << " missing";
  Proxy p;
  p.name = bsym.inputs[i].name;
  p.type = b.type_of(p.name);
  return p;
}

const Proxy& VjpCall::g() const {
  FSDPC_CHECK(!out_cts.empty() && out_cts[0]) << op_name(bsym.op) << ": no output cotangent";
  return *out_cts[0];
}

Operand op(const Proxy& p) { return Operand::of(p.name); }

Proxy unary(TraceBuilder& b, OpId id, const Proxy& x) { return b.emit1(id, {op(x)}); }

Proxy binary(TraceBuilder& b, OpId id, const Proxy& x, const Proxy& y) {
  return b.emit1(id, {op(x), op(y)});
}

// Scalar literals take the tensor operand's dtype, so one constant serves
// every float width.
Proxy binary(TraceBuilder& b, OpId id, const Proxy& x, double y) {
  return b.emit1(id, {op(x), Operand::lit(y)});
}

Proxy binary(TraceBuilder& b, OpId id, double x, const Proxy& y) {
  return b.emit1(id, {Operand::lit(x), op(y)});
}

Proxy where(TraceBuilder& b, const Proxy& cond, const Operand& x, const Operand& y) {
  return b.emit1(OpId::Where, {op(cond), x, y});
}

Proxy sum(TraceBuilder& b, const Proxy& x, IntList dims) {
  if (dims.empty()) return x;
  return b.emit1(OpId::Sum, {op(x)}, Attrs{{"dims", std::move(dims)}});
}

Proxy broadcast(TraceBuilder& b, const Proxy& x, const Shape& shape, IntList broadcast_dims) {
  return b.emit1(OpId::BroadcastInDim, {op(x)},
                 Attrs{{"shape", IntList(shape)}, {"broadcast_dims", std::move(broadcast_dims)}});
}

Proxy broadcast_back(TraceBuilder& b, const Proxy& reduced, const Shape& full,
                     const IntList& dims) {
  IntList keep;
  size_t next = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(full.size()); ++i) {
    if (next < dims.size() && dims[next] == i)
      ++next;
    else
      keep.push_back(i);
  }
  return broadcast(b, reduced, full, std::move(keep));
}

Proxy reshape(TraceBuilder& b, const Proxy& x, const Shape& shape) {
  if (x.type.shape == shape) return x;
  return b.emit1(OpId::Reshape, {op(x)}, Attrs{{"shape", IntList(shape)}});
}

Proxy permute(TraceBuilder& b, const Proxy& x, IntList dims) {
  return b.emit1(OpId::Permute, {op(x)}, Attrs{{"dims", std::move(dims)}});
}

Proxy convert(TraceBuilder& b, const Proxy& x, DType dtype) {
  return b.emit1(OpId::ConvertElementType, {op(x)},
                 Attrs{{"dtype", std::string(dtype_name(dtype))}});
}

Proxy indices_from(TraceBuilder& b, const Proxy& first, int64_t n) {
  const Proxy at = broadcast(b, first, Shape{n}, {});
  const Proxy iota = b.emit1(OpId::Iota, {},
                             Attrs{{"length", n}, {"dtype", std::string("i64")}, {"device", device_name(first.type.device)}});
  return b.emit1(OpId::Add, {op(iota), op(at)});
}

Proxy zeros(TraceBuilder& b, const TensorType& like) {
  return b.emit1(OpId::Full, {},
                 Attrs{{"shape", IntList(like.shape)},
                       {"value", 0.0},
                       {"dtype", std::string(dtype_name(like.dtype))},
                       {"device", device_name(like.device)}});
}

Proxy matmul(TraceBuilder& b, const Proxy& x, const Proxy& y) {
  return binary(b, OpId::Matmul, x, y);
}

Proxy unbroadcast(TraceBuilder& b, const Proxy& g, const Shape& x_shape, const IntList& bdims) {
  const Shape& out = g.type.shape;
  IntList reduce;  // dims x lacks, and x's size-1 dims that were stretched
  size_t next = 0;
  for (int64_t d = 0; d < static_cast<int64_t>(out.size()); ++d) {
    const bool mapped = next < bdims.size() && bdims[next] == d;
    if (!mapped) {
      reduce.push_back(d);
      continue;
    }
    if (x_shape[next] == 1 && out[d] != 1) reduce.push_back(d);
    ++next;
  }
  return reshape(b, sum(b, g, std::move(reduce)), x_shape);
}

int64_t rank(const Proxy& p) { return static_cast<int64_t>(p.type.shape.size()); }

IntList range(int64_t n) {
  IntList r;
  for (int64_t i = 0; i < n; ++i) r.push_back(i);
  return r;
}

IntList swap_last_two(int64_t rank) {
  IntList p = range(rank);
  std::swap(p[rank - 2], p[rank - 1]);
  return p;
}

Attrs group_attrs(const std::string& group, int64_t size) {
  return Attrs{{"group", group}, {"size", size}};
}

}  // namespace vjp_detail

Cotangents vjp(TraceBuilder& b, const BoundSymbol& bsym, const Cotangents& out_cts,
               const std::vector<bool>& needs) {
  using namespace vjp_detail;
  FSDPC_CHECK(out_cts.size() == bsym.outputs.size())
      << op_name(bsym.op) << ": " << out_cts.size() << " cotangents for " << bsym.outputs.size()
      << " outputs";
  const VjpCall c{b, bsym, out_cts, needs};
  bool any = false;
  for (size_t i = 0; i < c.arity(); ++i) any = any || c.need(i);
  if (!any) return c.none();
  if (op_info(bsym.op).composite) return vjp_nn(c);
  switch (op_info(bsym.op).category) {
    case OpCategory::elementwise: return vjp_elementwise(c);
    case OpCategory::reduction:
    case OpCategory::shape:
    case OpCategory::indexing:
    case OpCategory::matmul: return vjp_shape(c);
    case OpCategory::collective:
    case OpCategory::buffer: return vjp_distributed(c);
    case OpCategory::creation:  // no inputs, nothing to differentiate
    case OpCategory::memory:    // del defines nothing
    case OpCategory::fusion:    // regions form after claiming, long after grad
    case OpCategory::nn: break;
  }
  return c.none();
}

}  // namespace fsdpc
