// VJP rules of the reductions, shape ops, indexing and matmul: each undoes
// its op's data movement on the cotangent (slice <-> pad, take ->
// index_add, broadcast -> sum).
#include "ir/error.h"
#include "passes/vjp_rules_util.h"

namespace fsdpc::vjp_detail {

namespace {

Proxy sum_grad(const VjpCall& c) {
  return broadcast_back(c.b, c.g(), c.in(0).type.shape, c.bsym.attrs.get_ints("dims"));
}

// PyTorch's amax: the cotangent goes to the positions holding the maximum,
// split evenly among ties.
Proxy amax_grad(const VjpCall& c) {
  TraceBuilder& b = c.b;
  const Proxy x = c.in(0);
  const IntList& dims = c.bsym.attrs.get_ints("dims");
  const Shape& shape = x.type.shape;
  Proxy hit = binary(b, OpId::Eq, x, broadcast_back(b, c.out(), shape, dims));
  Proxy mask = convert(b, hit, x.type.dtype);
  Proxy share = binary(b, OpId::Div, c.g(), sum(b, mask, dims));
  return binary(b, OpId::Mul, broadcast_back(b, share, shape, dims), mask);
}

Proxy permute_grad(const VjpCall& c) {
  const IntList& dims = c.bsym.attrs.get_ints("dims");
  IntList inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inverse[dims[i]] = static_cast<int64_t>(i);
  return permute(c.b, c.g(), std::move(inverse));
}

// Elements an n-long slice with this stride covers, first to last.
int64_t covered(int64_t n, int64_t stride) { return n > 0 ? (n - 1) * stride + 1 : 0; }

// The slice's elements go back where they came from; a strided slice leaves
// stride-1 zeros between them (interior padding).
Proxy slice_grad(const VjpCall& c) {
  const Shape& x = c.in(0).type.shape;
  const Shape& n = c.out().type.shape;
  const IntList& starts = c.bsym.attrs.get_ints("starts");
  const IntList& strides = c.bsym.attrs.get_ints("strides");
  IntList hi, interior;
  bool strided = false;
  for (size_t d = 0; d < x.size(); ++d) {
    hi.push_back(x[d] - starts[d] - covered(n[d], strides[d]));
    interior.push_back(strides[d] - 1);
    strided = strided || strides[d] > 1;
  }
  Attrs attrs{{"lo", starts}, {"hi", std::move(hi)}};
  if (strided) attrs.set("interior", std::move(interior));
  attrs.set("value", 0.0);
  return c.b.emit1(OpId::Pad, {op(c.g())}, std::move(attrs));
}

// The padding's cotangent is dropped: slice out the input's elements.
Proxy pad_grad(const VjpCall& c) {
  const Shape& x = c.in(0).type.shape;
  const IntList& lo = c.bsym.attrs.get_ints("lo");
  const IntList none(x.size(), 0);
  const IntList& interior =
      c.bsym.attrs.has("interior") ? c.bsym.attrs.get_ints("interior") : none;
  IntList ends, strides;
  for (size_t d = 0; d < x.size(); ++d) {
    strides.push_back(interior[d] + 1);
    ends.push_back(lo[d] + covered(x[d], strides.back()));
  }
  return c.b.emit1(OpId::Slice, {op(c.g())},
                   Attrs{{"starts", lo}, {"ends", std::move(ends)}, {"strides", std::move(strides)}});
}

Cotangents cat_grad(const VjpCall& c) {
  const Proxy& g = c.g();
  const int64_t dim = c.bsym.attrs.get_int("dim");
  const Shape& full = g.type.shape;
  Cotangents r = c.none();
  int64_t offset = 0;
  for (size_t i = 0; i < c.arity(); ++i) {
    const int64_t len = c.in(i).type.shape[dim];
    if (c.need(i)) {
      IntList starts(full.size(), 0), ends(full), strides(full.size(), 1);
      starts[dim] = offset;
      ends[dim] = offset + len;
      r[i] = c.b.emit1(OpId::Slice, {op(g)},
                       Attrs{{"starts", std::move(starts)}, {"ends", std::move(ends)},
                             {"strides", std::move(strides)}});
    }
    offset += len;
  }
  return r;
}

// take gathers rows; its cotangent scatter-adds them back, so repeated
// indices (one token used twice) accumulate.
Proxy take_grad(const VjpCall& c) {
  TraceBuilder& b = c.b;
  const Proxy a = c.in(0);
  const Proxy idx = c.in(1);
  const int64_t dim = c.bsym.attrs.get_int("dim");
  const int64_t n = numel(idx.type.shape);
  Shape rows(a.type.shape);
  rows[dim] = n;
  Proxy src = reshape(b, c.g(), rows);
  Proxy flat = reshape(b, idx, {n});
  return b.emit1(OpId::IndexAdd, {op(zeros(b, a.type)), op(flat), op(src)},
                 Attrs{{"dim", dim}});
}

Cotangents index_add_grad(const VjpCall& c) {
  Cotangents r = c.none();
  if (c.need(0)) r[0] = c.g();
  if (c.need(2))
    r[2] = c.b.emit1(OpId::Take, {op(c.g()), c.bsym.inputs[1]},
                     Attrs{{"dim", c.bsym.attrs.get_int("dim")}});
  return r;
}

// a [..., M, K] @ b [..., K, N] (or [K, N]): ga = g bᵀ, gb = aᵀ g; a shared
// 2-D b sums its cotangent over the batch, done as one matmul of the rows.
Cotangents matmul_grad(const VjpCall& c) {
  TraceBuilder& b = c.b;
  const Proxy x = c.in(0), y = c.in(1);
  const Proxy& g = c.g();
  Cotangents r = c.none();
  if (c.need(0)) r[0] = matmul(b, g, permute(b, y, swap_last_two(rank(y))));
  if (!c.need(1)) return r;
  if (rank(y) == 2 && rank(x) > 2) {
    const int64_t k = x.type.shape.back(), n = g.type.shape.back();
    const int64_t rows = numel(x.type.shape) / k;
    Proxy x2 = reshape(b, x, {rows, k});
    r[1] = matmul(b, permute(b, x2, {1, 0}), reshape(b, g, {rows, n}));
  } else {
    r[1] = matmul(b, permute(b, x, swap_last_two(rank(x))), g);
  }
  return r;
}

}  // namespace

Cotangents vjp_shape(const VjpCall& c) {
  // vjp() calls a rule only when some input needs a cotangent, so the
  // one-input rules below need not ask.
  switch (c.bsym.op) {
    case OpId::Sum: return {sum_grad(c)};
    case OpId::Amax: return {amax_grad(c)};
    case OpId::Reshape: return {reshape(c.b, c.g(), c.in(0).type.shape)};
    case OpId::Permute: return {permute_grad(c)};
    case OpId::BroadcastInDim:
      return {unbroadcast(c.b, c.g(), c.in(0).type.shape,
                          c.bsym.attrs.get_ints("broadcast_dims"))};
    case OpId::Slice: return {slice_grad(c)};
    case OpId::Pad: return {pad_grad(c)};
    case OpId::Cat: return cat_grad(c);
    case OpId::Take:  // idx is integer and never differentiated
      return {take_grad(c), std::nullopt};
    case OpId::IndexAdd: return index_add_grad(c);
    case OpId::Matmul: return matmul_grad(c);
    // not shape, indexing or matmul ops: the check below
    FSDPC_ELEMENTWISE_CASES
    FSDPC_CREATION_CASES
    FSDPC_COMPOSITE_CASES
    FSDPC_COLLECTIVE_CASES
    FSDPC_BUFFER_CASES
    FSDPC_FUSION_CASES
    FSDPC_MEMORY_CASES
      break;
  }
  FSDPC_CHECK(false) << op_name(c.bsym.op) << " has no shape-family VJP";
  return c.none();
}

}  // namespace fsdpc::vjp_detail
