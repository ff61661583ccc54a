// Meta functions of the shape and indexing ops (docs/ir.md "Shape",
// "Indexing"). Dims and sizes are canonical: non-negative and explicit.
#include "ir/meta_rules.h"

namespace fsdpc::meta {

namespace {

// An int-list attribute with one entry per dim of x (slice, pad).
const IntList& per_dim_attr(const MetaArgs& a, const std::string& key, const TensorType& x) {
  const IntList& l = a.get_ints(key);
  if (l.size() != x.shape.size())
    a.fail(key, " ", list_str(l), " has ", l.size(), " entries; expected one per dim of input ",
           desc(x), " (rank ", x.shape.size(), ")");
  return l;
}

}  // namespace

TensorType meta_reshape(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  Shape shape = shape_attr(a, "shape");
  if (numel(shape) != numel(x.shape))
    a.fail("shape ", shape_str(shape), " has ", numel(shape), " elements, input ", desc(x),
           " has ", numel(x.shape));
  return compute_out(x, std::move(shape), x.dtype);
}

TensorType meta_permute(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  const IntList& dims = a.get_ints("dims");
  const size_t rank = x.shape.size();
  std::vector<bool> seen(rank, false);
  bool ok = dims.size() == rank;
  for (size_t i = 0; ok && i < dims.size(); ++i) {
    const int64_t d = dims[i];
    ok = d >= 0 && d < static_cast<int64_t>(rank) && !seen[d];
    if (ok) seen[d] = true;
  }
  if (!ok)
    a.fail("dims ", list_str(dims), " is not a permutation of 0..", static_cast<int64_t>(rank) - 1,
           " for input ", desc(x));
  Shape out;
  for (int64_t d : dims) out.push_back(x.shape[d]);
  return compute_out(x, std::move(out), x.dtype);
}

TensorType meta_broadcast_in_dim(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  Shape shape = shape_attr(a, "shape");
  const IntList& bd = a.get_ints("broadcast_dims");
  if (bd.size() != x.shape.size())
    a.fail("broadcast_dims ", list_str(bd), " has ", bd.size(), " entries, input ", desc(x),
           " has rank ", x.shape.size());
  for (size_t i = 0; i < bd.size(); ++i) {
    if (bd[i] < 0 || bd[i] >= static_cast<int64_t>(shape.size()))
      a.fail("broadcast_dims ", list_str(bd), " out of range for shape ", shape_str(shape),
             " (rank ", shape.size(), ")");
    if (i > 0 && bd[i] <= bd[i - 1])
      a.fail("broadcast_dims ", list_str(bd), " must be strictly increasing");
    if (x.shape[i] != 1 && x.shape[i] != shape[bd[i]])
      a.fail("input ", desc(x), " cannot broadcast to ", shape_str(shape), " with broadcast_dims ",
             list_str(bd), ": dim ", i, " has size ", x.shape[i], ", target dim ", bd[i],
             " has size ", shape[bd[i]], " (must be 1 or equal)");
  }
  return compute_out(x, std::move(shape), x.dtype);
}

TensorType meta_slice(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  const IntList& starts = per_dim_attr(a, "starts", x);
  const IntList& ends = per_dim_attr(a, "ends", x);
  const IntList& strides = per_dim_attr(a, "strides", x);
  Shape out;
  for (size_t i = 0; i < x.shape.size(); ++i) {
    if (starts[i] < 0 || starts[i] > ends[i] || ends[i] > x.shape[i])
      a.fail("dim ", i, ": start ", starts[i], ", end ", ends[i], " out of bounds for input ",
             desc(x), " (need 0 <= start <= end <= ", x.shape[i], ")");
    if (strides[i] < 1) a.fail("strides ", list_str(strides), ": stride at dim ", i, " must be >= 1");
    out.push_back((ends[i] - starts[i] + strides[i] - 1) / strides[i]);
  }
  return compute_out(x, std::move(out), x.dtype);
}

TensorType meta_pad(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  const IntList& lo = per_dim_attr(a, "lo", x);
  const IntList& hi = per_dim_attr(a, "hi", x);
  a.get_double("value");  // required, though it does not change the type
  // Optional interior padding (`value` between neighbours, as XLA's pad): the
  // VJP of a strided slice.
  const IntList no_interior(x.shape.size(), 0);
  const IntList& interior = a.has("interior") ? per_dim_attr(a, "interior", x) : no_interior;
  Shape out;
  for (size_t i = 0; i < x.shape.size(); ++i) {
    if (lo[i] < 0 || hi[i] < 0)
      a.fail("lo ", list_str(lo), ", hi ", list_str(hi), ": padding at dim ", i, " is negative");
    if (interior[i] < 0)
      a.fail("interior ", list_str(interior), ": padding at dim ", i, " is negative");
    const int64_t gaps = x.shape[i] > 0 ? x.shape[i] - 1 : 0;
    out.push_back(lo[i] + x.shape[i] + gaps * interior[i] + hi[i]);
  }
  return compute_out(x, std::move(out), x.dtype);
}

TensorType meta_cat(const MetaArgs& a) {
  const TensorType& first = a.tensor(0);
  const int64_t dim = dim_attr(a, "dim", first.shape.size());
  Shape out = first.shape;
  for (size_t i = 1; i < a.size(); ++i) {
    const TensorType& t = a.tensor(i);
    require_same_dtype(a, first, "input 0", t, "input " + std::to_string(i));
    bool fits = t.shape.size() == first.shape.size();
    for (size_t d = 0; fits && d < t.shape.size(); ++d)
      fits = static_cast<int64_t>(d) == dim || t.shape[d] == first.shape[d];
    if (!fits)
      a.fail("input ", i, " is ", desc(t), ", input 0 is ", desc(first),
             "; shapes must match except at dim ", dim);
    out[dim] += t.shape[dim];
  }
  return compute_out(first, std::move(out), first.dtype);
}

TensorType meta_take(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  const TensorType& idx = a.tensor(1);
  require_index(a, idx, "idx");
  const int64_t dim = dim_attr(a, "dim", x.shape.size());
  Shape out(x.shape.begin(), x.shape.begin() + dim);
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), x.shape.begin() + dim + 1, x.shape.end());
  return compute_out(x, std::move(out), x.dtype);
}

TensorType meta_index_add(const MetaArgs& a) {
  const TensorType& x = a.tensor(0);
  const TensorType& idx = a.tensor(1);
  const TensorType& src = a.tensor(2);
  require_index(a, idx, "idx");
  if (idx.shape.size() != 1) a.fail("idx is ", desc(idx), "; expected a 1-D index tensor");
  const int64_t dim = dim_attr(a, "dim", x.shape.size());
  require_same_dtype(a, x, "a", src, "src");
  Shape want = x.shape;
  want[dim] = idx.shape[0];
  if (src.shape != want)
    a.fail("src is ", desc(src), "; expected ", shape_str(want), " (a ", desc(x), " with dim ", dim,
           " replaced by len(idx) = ", idx.shape[0], ")");
  return compute_out(x, x.shape, x.dtype);
}

}  // namespace fsdpc::meta
