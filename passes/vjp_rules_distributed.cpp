// VJP rules of the collectives and flat buffers, and the lowering of
// synchronize. The SPMD objective is the sum of every rank's loss, so each
// collective's VJP is its transpose: all_gather <-> reduce_scatter,
// all_reduce(sum) -> all_reduce(sum), pack <-> unpack. Cotangents are never
// futures: wait's rule hands its cotangent to the collective, whose rule
// waits on the collective it emits. Tensor parallelism is the exception: its
// tp ranks compute one replicated loss, so Megatron's g (an all_reduce with
// grad=identity) passes its cotangent on and f (a synchronize of an
// activation with grad=sum) all-reduces it without dividing.
#include "ir/error.h"
#include "passes/vjp_rules_util.h"

namespace fsdpc {

namespace vjp_detail {

namespace {

Proxy wait(TraceBuilder& b, const Proxy& future) { return b.emit1(OpId::Wait, {op(future)}); }

Proxy all_reduce(TraceBuilder& b, const Proxy& x, const std::string& group, int64_t size) {
  Attrs attrs = group_attrs(group, size);
  attrs.set("op", std::string("sum"));
  return wait(b, b.emit1(OpId::AllReduce, {op(x)}, std::move(attrs)));
}

Proxy reduce_scatter(TraceBuilder& b, const Proxy& x, const std::string& group, int64_t size,
                     int64_t dim, bool activation = false) {
  Attrs attrs = group_attrs(group, size);
  attrs.set("dim", dim).set("op", std::string("sum"));
  if (activation) attrs.set("dist", std::string("none"));
  return wait(b, b.emit1(OpId::ReduceScatter, {op(x)}, std::move(attrs)));
}

Proxy all_gather(TraceBuilder& b, const Proxy& x, const std::string& group, int64_t size,
                 int64_t dim) {
  Attrs attrs = group_attrs(group, size);
  attrs.set("dim", dim);
  return wait(b, b.emit1(OpId::AllGather, {op(x)}, std::move(attrs)));
}

// The group attributes of a collective statement.
const std::string& group(const VjpCall& c) { return c.bsym.attrs.get_str("group"); }
int64_t size(const VjpCall& c) { return c.bsym.attrs.get_int("size"); }

// all_gather(grad=split)'s cotangent: this member's chunk along `dim` of
// the gathered cotangent, found by its place in the group.
Proxy own_chunk(const VjpCall& c) {
  const int64_t dim = c.bsym.attrs.get_int("dim");
  const TensorType& x = c.in(0).type;
  const int64_t n = x.shape.at(static_cast<size_t>(dim));
  const std::string device = device_name(x.device);
  Attrs where = group_attrs(group(c), size(c));
  where.set("device", device);
  const Proxy first =
      c.b.emit1(OpId::Mul, {op(c.b.emit1(OpId::AxisIndex, {}, std::move(where))), Operand::lit(static_cast<double>(n))});
  return c.b.emit1(OpId::Take, {op(c.g()), op(indices_from(c.b, first, n))}, Attrs{{"dim", dim}});
}

Cotangents pack_grad(const VjpCall& c) {
  IntLists shapes;
  for (size_t i = 0; i < c.arity(); ++i) shapes.push_back(c.in(i).type.shape);
  std::vector<Proxy> parts =
      c.b.emit(OpId::Unpack, {op(c.g())}, Attrs{{"shapes", std::move(shapes)}});
  Cotangents r = c.none();
  for (size_t i = 0; i < c.arity(); ++i)
    if (c.need(i)) r[i] = parts[i];
  return r;
}

// Outputs nobody differentiated contribute zeros to the packed cotangent.
Cotangents unpack_grad(const VjpCall& c) {
  std::vector<Operand> parts;
  for (size_t i = 0; i < c.out_cts.size(); ++i) {
    const std::optional<Proxy>& ct = c.out_cts[i];
    parts.push_back(op(ct ? *ct : zeros(c.b, c.bsym.outputs[i].type)));
  }
  return {c.b.emit1(OpId::Pack, std::move(parts))};
}

}  // namespace

Cotangents vjp_distributed(const VjpCall& c) {
  switch (c.bsym.op) {
    case OpId::Synchronize: return {reduce_synchronized_grad(c.b, c.bsym, c.g())};
    case OpId::AllGather:  // an activation's gather (sequence parallelism) gives an activation's cotangent
      if (c.bsym.attrs.has("grad") && c.bsym.attrs.get_str("grad") == "split") return {own_chunk(c)};
      return {reduce_scatter(c.b, c.g(), group(c), size(c), c.bsym.attrs.get_int("dim"),
                             c.in(0).type.dist == DistType::none)};
    case OpId::ReduceScatter:
      return {all_gather(c.b, c.g(), group(c), size(c), c.bsym.attrs.get_int("dim"))};
    case OpId::AllReduce:
      if (c.bsym.attrs.has("grad") && c.bsym.attrs.get_str("grad") == "identity") return {c.g()};
      if (c.bsym.attrs.has("grad") && c.bsym.attrs.get_str("grad") == "none") return c.none();
      return {all_reduce(c.b, c.g(), group(c), size(c))};
    case OpId::Broadcast:
      // The root's cotangent is the sum over the group, every other rank's
      // is zero: that would need axis_index and a mask, which nothing asks for yet.
      fail("no VJP for broadcast (", c.bsym.outputs[0].name,
           "): its cotangent depends on the rank (the root gets the group's sum, others zero)");
    case OpId::Wait: return {c.g()};
    case OpId::Send:
    case OpId::Recv:
      // A stage's backward sends its cotangents itself: the pipeline pass
      // inserts both directions after autodiff.
      fail("no VJP for ", op_name(c.bsym.op), " (", c.bsym.outputs[0].name,
           "): point-to-point ops are inserted after autodiff (by the pipeline pass), never differentiated");
    case OpId::Pack: return pack_grad(c);
    case OpId::Unpack: return unpack_grad(c);
    case OpId::Quantize:
    case OpId::Dequantize:
      // Quantized communication is inserted after autodiff, on the forward's
      // parameter gathers (passes/quantize_gathers.h) and DiLoCo's outer
      // exchange; a gradient is never quantized without error feedback.
      fail("no VJP for ", op_name(c.bsym.op), " (", c.bsym.outputs[0].name,
           "): quantized communication is inserted after autodiff, never differentiated");
    // not collective or buffer ops: the check below
    FSDPC_ELEMENTWISE_CASES
    FSDPC_REDUCTION_CASES
    FSDPC_SHAPE_CASES
    FSDPC_INDEXING_CASES
    FSDPC_MATMUL_CASES
    FSDPC_CREATION_CASES
    FSDPC_COMPOSITE_CASES
    FSDPC_FUSION_CASES
    FSDPC_MEMORY_CASES
      break;
  }
  FSDPC_CHECK(false) << op_name(c.bsym.op) << " is not a collective or buffer op";
  return c.none();
}

}  // namespace vjp_detail

using namespace vjp_detail;

Proxy lower_synchronize(TraceBuilder& b, const BoundSymbol& sync) {
  Proxy x;
  x.name = sync.inputs.at(0).name;
  x.type = b.type_of(x.name);
  if (x.type.dist != DistType::fully_sharded) return x;
  const Attrs& a = sync.attrs;
  const Shape shape = a.get_ints("shape");
  Proxy full = all_gather(b, x, a.get_str("group"), a.get_int("size"), 0);
  if (full.type.shape[0] == shape[0]) return full;
  // Drop the last rank's zero padding rows.
  return b.emit1(OpId::Slice, {op(full)},
                 Attrs{{"starts", IntList(shape.size(), 0)},
                       {"ends", shape},
                       {"strides", IntList(shape.size(), 1)}});
}

Proxy reduce_synchronized_grad(TraceBuilder& b, const BoundSymbol& sync, const Proxy& g) {
  return reduce_synchronized_grad(b, sync, b.type_of(sync.inputs.at(0).name), g);
}

Proxy reduce_synchronized_grad(TraceBuilder& b, const BoundSymbol& sync, const TensorType& x, const Proxy& g) {
  const Attrs& a = sync.attrs;
  const std::string& group = a.get_str("group");
  const int64_t size = a.get_int("size");
  const int64_t replicas = a.get_int_or("replicate_size", 1);
  // tp's f: the ranks' partial cotangents of one activation add up.
  if (a.has("grad") && a.get_str("grad") == "sum") return all_reduce(b, g, group, size);
  // Divide before summing so low-precision sums cannot overflow.
  Proxy r = binary(b, OpId::Div, g, static_cast<double>(size * replicas));
  if (x.dist == DistType::fully_sharded) {
    const int64_t padded = x.shape[0] * size;
    if (padded != r.type.shape[0]) {
      IntList lo(x.shape.size(), 0), hi(x.shape.size(), 0);
      hi[0] = padded - r.type.shape[0];
      r = b.emit1(OpId::Pad, {op(r)}, Attrs{{"lo", std::move(lo)}, {"hi", std::move(hi)}, {"value", 0.0}});
    }
    r = reduce_scatter(b, r, group, size, 0);
  } else {
    r = all_reduce(b, r, group, size);
  }
  if (a.has("replicate_group")) r = all_reduce(b, r, a.get_str("replicate_group"), replicas);
  return r;
}

}  // namespace fsdpc
