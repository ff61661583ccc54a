// Meta functions of the elementwise ops and the reductions (docs/ir.md
// "Elementwise", "Reductions"). Elementwise ops never broadcast: the frontend
// inserts broadcast_in_dim, so shapes here must match exactly.
#include "ir/meta_rules.h"

namespace fsdpc::meta {

namespace {

void require_non_bool(const MetaArgs& a, const TensorType& t, std::string_view what) {
  if (t.dtype == DType::boolean) a.fail(what, " is ", desc(t), "; expected a non-bool dtype");
}

// Checks a, b of a binary op (either may be a scalar literal) and returns
// the tensor one, whose shape and dtype the output follows.
const TensorType& binary_operands(const MetaArgs& a, bool allow_bool) {
  const char* names[] = {"a", "b"};
  for (size_t i = 0; i < 2; ++i)
    if (!a.is_scalar(i) && !allow_bool) require_non_bool(a, a.tensor(i), names[i]);
  if (a.is_scalar(0)) return a.tensor(1);
  if (a.is_scalar(1)) return a.tensor(0);
  const TensorType& x = a.tensor(0);
  const TensorType& y = a.tensor(1);
  if (x.shape != y.shape)
    a.fail("shapes differ: a is ", desc(x), ", b is ", desc(y),
           " (elementwise ops do not broadcast; use broadcast_in_dim)");
  require_same_dtype(a, x, "a", y, "b");
  return x;
}

}  // namespace

TensorType meta_unary(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  if (a.op() == OpId::Neg)
    require_non_bool(a, x, "x");
  else
    require_float(a, x, "x");
  return compute_out(x, x.shape, x.dtype);
}

TensorType meta_convert(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  TensorType out = compute_out(x, x.shape, a.get_dtype("dtype"));
  // Converting each element of a shard gives the shard of the converted
  // tensor: mixed precision casts parameter shards before they are
  // gathered. (A cast of a replicated value is a compute result like any
  // other: dist none.)
  if (x.dist == DistType::fully_sharded) out.dist = DistType::fully_sharded;
  return out;
}

TensorType meta_binary(const MetaArgs& a) {
  const TensorType& t = binary_operands(a, false);
  return compute_out(t, t.shape, t.dtype);
}

TensorType meta_compare(const MetaArgs& a) {
  const bool allow_bool = a.op() == OpId::Eq || a.op() == OpId::Ne;
  const TensorType& t = binary_operands(a, allow_bool);
  return compute_out(t, t.shape, DType::boolean);
}

TensorType meta_where(const MetaArgs& a) {
  if (a.is_scalar(0)) a.fail("cond (input 0) is a scalar literal; expected a bool tensor");
  const TensorType& cond = a.tensor(0);
  if (cond.dtype != DType::boolean) a.fail("cond is ", desc(cond), "; expected dtype bool");
  if (a.is_scalar(1) && a.is_scalar(2))
    a.fail("a and b are both scalar literals; one must be a tensor");
  const char* names[] = {"cond", "a", "b"};
  for (size_t i = 1; i < 3; ++i) {
    if (a.is_scalar(i)) continue;
    const TensorType& t = a.tensor(i);
    if (t.shape != cond.shape)
      a.fail(names[i], " is ", desc(t), ", cond is ", desc(cond),
             " (a and b must have cond's shape)");
  }
  if (!a.is_scalar(1) && !a.is_scalar(2)) require_same_dtype(a, a.tensor(1), "a", a.tensor(2), "b");
  const TensorType& t = a.is_scalar(1) ? a.tensor(2) : a.tensor(1);
  return compute_out(cond, cond.shape, t.dtype);
}

TensorType meta_reduction(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  const IntList& dims = a.get_ints("dims");
  const auto rank = static_cast<int64_t>(x.shape.size());
  for (int64_t d : dims)
    if (d < 0 || d >= rank) a.fail("dims ", list_str(dims), " out of range for rank ", rank);
  for (size_t i = 1; i < dims.size(); ++i)
    if (dims[i] <= dims[i - 1]) a.fail("dims ", list_str(dims), " must be strictly increasing");
  Shape out;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (next < dims.size() && dims[next] == i)
      ++next;
    else
      out.push_back(x.shape[i]);
  }
  return compute_out(x, std::move(out), x.dtype);
}

}  // namespace fsdpc::meta
