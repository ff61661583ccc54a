// Meta functions of the distributed ops and communication buffers (docs/ir.md
// "Distributed"). These are the only ops whose outputs are replicated,
// fully_sharded or futures; sharding pads dim 0 to ceil(d0/size) rows.
#include <initializer_list>

#include "ir/meta_rules.h"
#include "ir/quantize.h"

namespace fsdpc::meta {

namespace {

// Checks `group` and returns `size`, the number of ranks in it.
int64_t group_size(const MetaArgs& a) {
  if (a.get_str("group").empty()) a.fail("group is empty; expected a process-group name");
  const int64_t size = a.get_int("size");
  if (size < 1) a.fail("size ", size, " must be >= 1");
  return size;
}

void require_sum(const MetaArgs& a) {
  const std::string& op = a.get_str("op");
  if (op != "sum") a.fail("op '", op, "' is not supported (expected sum)");
}

TensorType collective_out(const TensorType& x, Shape shape, DistType dist, bool future) {
  TensorType t = x;
  t.shape = std::move(shape);
  t.dist = dist;
  t.future = future;
  return t;
}

std::string lists_str(const IntLists& ls) {
  std::string out = "[";
  for (size_t i = 0; i < ls.size(); ++i) out += (i ? ", " : "") + list_str(ls[i]);
  return out + "]";
}

// The full shape a sharded x stands for; x holds ceil(shape[0]/size) rows.
Shape sharded_full_shape(const MetaArgs& a, const TensorType& x, int64_t size) {
  if (!a.has("shape"))
    a.fail("input ", desc(x), " is fully_sharded; the full shape attribute 'shape' is missing");
  Shape shape = shape_attr(a, "shape");
  bool fits = !shape.empty() && shape.size() == x.shape.size();
  for (size_t i = 1; fits && i < shape.size(); ++i) fits = shape[i] == x.shape[i];
  if (fits) {
    const int64_t rows = (shape[0] + size - 1) / size;
    if (x.shape[0] != rows)
      a.fail("sharded input ", desc(x), " does not fit shape ", shape_str(shape), " over size ",
             size, ": expected ", rows, " rows per rank (ceil(", shape[0], "/", size, "))");
  } else {
    a.fail("sharded input ", desc(x), " does not fit shape ", shape_str(shape),
           ": expected the same rank and equal dims after dim 0");
  }
  return shape;
}

// The optional `grad` attribute names what the backward does with the
// cotangent. FSDP's synchronize averages it over the group (mean, the
// default); tensor parallelism's f (identity forward before a column-parallel
// block) sums it; its g (all_reduce after a row-parallel layer) passes it on
// unchanged (identity), as every tp rank computes the same loss.
void check_grad_attr(const MetaArgs& a, std::initializer_list<const char*> allowed) {
  if (!a.has("grad")) return;
  const std::string& g = a.get_str("grad");
  std::string names;
  for (const char* n : allowed) {
    if (g == n) return;
    names += std::string(names.empty() ? "" : " or ") + n;
  }
  a.fail("grad '", g, "' is not supported (expected ", names, ")");
}

}  // namespace

TensorType meta_synchronize(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  const int64_t size = group_size(a);
  check_grad_attr(a, {"mean", "sum"});
  // reduce_dtype (mixed precision, passes/autocast.h): the float dtype the
  // backward reduces the gradient in.
  if (a.has("reduce_dtype")) {
    const std::optional<DType> d = parse_dtype(a.get_str("reduce_dtype"));
    if (!d || !is_float(*d)) a.fail("reduce_dtype '", a.get_str("reduce_dtype"), "' is not a float dtype");
  }
  // Tensor parallelism's f: an activation every tp rank holds whole.
  if (x.dist == DistType::none && a.has("grad") && a.get_str("grad") == "sum")
    return collective_out(x, x.shape, DistType::none, false);
  if (x.dist == DistType::none)
    a.fail("input ", desc(x), " has distribution none; expected fully_sharded or replicated");
  if (x.dist == DistType::fully_sharded)
    return collective_out(x, sharded_full_shape(a, x, size), DistType::replicated, false);
  if (a.has("shape") && shape_attr(a, "shape") != x.shape)
    a.fail("shape ", shape_str(a.get_ints("shape")), " differs from replicated input ", desc(x));
  return collective_out(x, x.shape, DistType::replicated, false);
}

// grad=split: every member computes the same thing from the gathered value
// (sequence parallelism's entry to replicated work), so a member's
// cotangent is its own chunk of the (identical) gathered cotangent, not the
// group's sum of them (the default, for work each member does differently).
TensorType meta_all_gather(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  const int64_t size = group_size(a);
  const int64_t dim = dim_attr(a, "dim", x.shape.size());
  check_grad_attr(a, {"sum", "split"});
  Shape out = x.shape;
  out[dim] *= size;
  return collective_out(x, std::move(out), DistType::replicated, true);
}

TensorType meta_reduce_scatter(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  const int64_t size = group_size(a);
  const int64_t dim = dim_attr(a, "dim", x.shape.size());
  require_sum(a);
  if (x.shape[dim] % size != 0)
    a.fail("x is ", desc(x), ": dim ", dim, " (size ", x.shape[dim],
           ") is not divisible by group size ", size);
  Shape out = x.shape;
  out[dim] /= size;
  // dist=none: an activation each rank holds a part of (sequence
  // parallelism's), not an FSDP shard.
  if (a.has("dist")) {
    if (a.get_str("dist") != "none") a.fail("dist '", a.get_str("dist"), "' is not supported (expected none)");
    return collective_out(x, std::move(out), DistType::none, true);
  }
  return collective_out(x, std::move(out), DistType::fully_sharded, true);
}

// op=max (tensor parallelism's softmax shift over a split vocabulary) has no
// VJP: it must say grad=none, which stops the cotangent there. The shift
// cancels out of the loss, so nothing is lost.
TensorType meta_all_reduce(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  group_size(a);
  const std::string& op = a.get_str("op");
  if (op != "sum" && op != "max") a.fail("op '", op, "' is not supported (expected sum or max)");
  check_grad_attr(a, {"sum", "identity", "none"});
  if (op == "max" && !(a.has("grad") && a.get_str("grad") == "none"))
    a.fail("op 'max' has no gradient; expected grad=none");
  // A shard all-reduced across replicas (hybrid) is still a shard: the same
  // rows on every replica, different rows within the shard group.
  DistType dist = x.dist == DistType::fully_sharded ? DistType::fully_sharded : DistType::replicated;
  return collective_out(x, x.shape, dist, true);
}

TensorType meta_broadcast(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  const int64_t size = group_size(a);
  const int64_t root = a.get_int("root");
  if (root < 0 || root >= size) a.fail("root ", root, " out of range for group size ", size);
  return collective_out(x, x.shape, DistType::replicated, true);
}

TensorType meta_wait(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  if (!x.future)
    a.fail("input 0 is ", type_str(x), ", not a future; wait consumes the result of an async "
           "collective");
  TensorType t = x;
  t.future = false;
  return t;
}

namespace {

// A point-to-point op's `group`, `size` and `peer`: a message has two ends,
// so the group has at least two ranks, and `peer` is one of them. Whether
// peer is this rank itself is known only where the op runs.
void check_peer(const MetaArgs& a) {
  if (a.get_str("group").empty()) a.fail("group is empty; expected a process-group name");
  const int64_t size = a.get_int("size");
  if (size < 2) a.fail("size ", size, " must be >= 2 (a message needs a sender and a receiver)");
  const int64_t peer = a.get_int("peer");
  if (peer < 0 || peer >= size) a.fail("peer ", peer, " out of range for group size ", size);
}

}  // namespace

// The sender keeps its value: waiting on the send gives x back, so a trace
// can return it and dead-code elimination keeps the send.
TensorType meta_send(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  check_peer(a);
  return collective_out(x, x.shape, x.dist, true);
}

// No input: the message's type is spelled out, and the matching send's input
// must have it (checked where the message arrives).
TensorType meta_recv(const MetaArgs& a) {
  check_peer(a);
  TensorType t;
  t.shape = shape_attr(a, "shape");
  t.dtype = a.get_dtype("dtype");
  t.device = device_attr(a);
  t.future = true;
  return t;
}

TensorType meta_pack(const MetaArgs& a) {
  const TensorType& first = a.tensor(0);
  int64_t total = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const TensorType& t = a.tensor(i);
    require_same_dtype(a, first, "input 0", t, "input " + std::to_string(i));
    if (t.dist != first.dist)
      a.fail("input ", i, " is ", dist_name(t.dist), ", input 0 is ", dist_name(first.dist),
             "; all inputs must share one distribution");
    total += numel(t.shape);
  }
  return collective_out(first, {total}, first.dist, false);
}

Types meta_unpack(const MetaArgs& a) {
  const TensorType& buf = a.tensor(0);
  if (buf.shape.size() != 1) a.fail("buf is ", desc(buf), "; expected a 1-D buffer");
  const IntLists& shapes = a.get_int_lists("shapes");
  if (shapes.empty()) a.fail("shapes is empty; expected at least one shape");
  int64_t total = 0;
  for (const IntList& s : shapes) {
    for (int64_t d : s)
      if (d < 0) a.fail("shapes ", lists_str(shapes), " has a negative size");
    total += numel(s);
  }
  if (total != buf.shape[0])
    a.fail("shapes ", lists_str(shapes), " have ", total, " elements, buf ", desc(buf), " has ",
           buf.shape[0]);
  Types out;
  for (const IntList& s : shapes) out.push_back(collective_out(buf, s, buf.dist, false));
  return out;
}

TensorType meta_collective(const MetaArgs& a) {
  switch (a.op()) {
    case OpId::Synchronize: return meta_synchronize(a);
    case OpId::AllGather: return meta_all_gather(a);
    case OpId::ReduceScatter: return meta_reduce_scatter(a);
    case OpId::AllReduce: return meta_all_reduce(a);
    case OpId::Broadcast: return meta_broadcast(a);
    case OpId::Wait: return meta_wait(a);
    case OpId::Send: return meta_send(a);
    case OpId::Recv: return meta_recv(a);
    // not collectives: the check below
    FSDPC_CASES_EXCEPT_COLLECTIVE
      break;
  }
  FSDPC_CHECK(false) << a.name() << " is not a collective";
  return {};
}

namespace {

// Rows and blocks small enough that a row's byte count cannot overflow.
constexpr int64_t kMaxQuantRow = int64_t{1} << 60;

int64_t quant_block(const MetaArgs& a) {
  const int64_t block = a.get_int("block");
  if (block < 1 || block > (int64_t{1} << 30)) a.fail("block ", block, " must be in [1, 2^30]");
  return block;
}

}  // namespace

// quantize(x, block): x's rows as an int8 buffer (ir/quantize.h), in x's
// distribution: a shard quantizes where it lies, so that the buffer is
// what an all_gather moves.
TensorType meta_quantize(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  if (x.dtype != DType::f32 && x.dtype != DType::bf16) a.fail("x is ", desc(x), "; expected f32 or bf16");
  if (x.shape.empty()) a.fail("x is ", desc(x), "; expected at least one dimension (the rows it quantizes)");
  const int64_t block = quant_block(a);
  if (x.shape.back() > kMaxQuantRow) a.fail("x is ", desc(x), "; a row of more than 2^60 values cannot be quantized");
  TensorType out = collective_out(x, x.shape, x.dist, false);
  out.dtype = DType::i8;
  out.shape.back() = quantized_row_bytes(x.shape.back(), block);
  return out;
}

// dequantize(q, block, dtype): the values of q's quantized rows, as dtype.
TensorType meta_dequantize(const MetaArgs& a) {
  const TensorType& q = a.tensor(0);
  if (q.dtype != DType::i8 || q.shape.empty())
    a.fail("q is ", desc(q), "; expected an i8 buffer of quantized rows (from quantize)");
  const int64_t block = quant_block(a);
  const DType d = a.get_dtype("dtype");
  if (d != DType::f32 && d != DType::bf16) a.fail("dtype ", dtype_name(d), " is not supported (expected f32 or bf16)");
  const std::optional<int64_t> n =
      q.shape.back() > kMaxQuantRow ? std::nullopt : dequantized_row_size(q.shape.back(), block);
  if (!n)
    a.fail("q is ", desc(q), ": no row of values quantizes to ", q.shape.back(), " bytes in blocks of ", block,
           " (n values take n + 4 ceil(n / ", block, ") bytes)");
  TensorType out = collective_out(q, q.shape, q.dist, false);
  out.dtype = d;
  out.shape.back() = *n;
  return out;
}

}  // namespace fsdpc::meta
