// Shape, indexing and unpack ops of the reference executor. Data movement is
// expressed as strided walks (walk2), so each op only says which input
// element lands where; take and index_add check their indices.
#include <algorithm>

#include "executors/reference/reference_internal.h"

namespace fsdpc::reference {

namespace {

// out[index] = x[index mapped through src_strides from src_base].
Data gather(const Value& x, const TensorType& out, const Strides& src_strides, int64_t src_base) {
  Data d(numel(out.shape));
  const Data& s = x.data;
  walk2(out.shape, src_strides, src_base, row_major_strides(out.shape), 0,
        [&](int64_t from, int64_t to) { d[to] = s[from]; });
  return d;
}

Data permute(const BoundSymbol& b, const Value& x, const TensorType& out) {
  const IntList& dims = b.attrs.get_ints("dims");
  const Strides xs = row_major_strides(x.type.shape);
  Strides src(dims.size());
  for (size_t k = 0; k < dims.size(); ++k) src[k] = xs[dims[k]];
  return gather(x, out, src, 0);
}

Data broadcast_in_dim(const BoundSymbol& b, const Value& x, const TensorType& out) {
  const IntList& bd = b.attrs.get_ints("broadcast_dims");
  const Strides xs = row_major_strides(x.type.shape);
  Strides src(out.shape.size(), 0);  // new dims repeat the input
  for (size_t i = 0; i < bd.size(); ++i) src[bd[i]] = x.type.shape[i] == 1 ? 0 : xs[i];
  return gather(x, out, src, 0);
}

Data slice(const BoundSymbol& b, const Value& x, const TensorType& out) {
  const IntList& starts = b.attrs.get_ints("starts");
  const IntList& steps = b.attrs.get_ints("strides");
  const Strides xs = row_major_strides(x.type.shape);
  Strides src(xs.size());
  int64_t base = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    src[i] = xs[i] * steps[i];
    base += starts[i] * xs[i];
  }
  return gather(x, out, src, base);
}

// lo/hi padding, plus `interior` padding between neighbours when the
// attribute is present (the gradient of a strided slice).
Data pad(const BoundSymbol& b, const Value& x, const TensorType& out) {
  const Shape& xs = x.type.shape;
  const IntList& lo = b.attrs.get_ints("lo");
  const IntList& hi = b.attrs.get_ints("hi");
  const IntList interior = b.attrs.has("interior") ? b.attrs.get_ints("interior") : IntList(xs.size(), 0);
  FSDPC_CHECK(interior.size() == xs.size()) << "pad: interior has " << interior.size() << " entries";
  const Strides os = row_major_strides(out.shape);
  Strides dst(xs.size());
  int64_t base = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    FSDPC_CHECK(out.shape[i] == lo[i] + hi[i] + xs[i] + std::max<int64_t>(xs[i] - 1, 0) * interior[i])
        << "pad: output dim " << i << " does not match lo/hi/interior";
    dst[i] = os[i] * (interior[i] + 1);
    base += lo[i] * os[i];
  }
  Data d(numel(out.shape), to_dtype(b.attrs.get_double("value"), out.dtype));
  const Data& s = x.data;
  walk2(xs, row_major_strides(xs), 0, dst, base, [&](int64_t from, int64_t to) { d[to] = s[from]; });
  return d;
}

Data cat(const BoundSymbol& b, const std::vector<Input>& in, const TensorType& out) {
  const int64_t dim = b.attrs.get_int("dim");
  const Strides os = row_major_strides(out.shape);
  Data d(numel(out.shape));
  int64_t offset = 0;
  for (const Input& x : in) {
    const Shape& xs = x.value->type.shape;
    const Data& s = x.value->data;
    walk2(xs, row_major_strides(xs), 0, os, offset * os[dim], [&](int64_t from, int64_t to) { d[to] = s[from]; });
    offset += xs[dim];
  }
  return d;
}

// a viewed as [outer, rows, inner] around `dim`: what take and index_add index.
struct Rows {
  int64_t outer = 1, rows = 0, inner = 1;
};

Rows rows_around(const Shape& s, int64_t dim) {
  Rows r;
  r.rows = s[dim];
  for (int64_t i = 0; i < dim; ++i) r.outer *= s[i];
  for (size_t i = dim + 1; i < s.size(); ++i) r.inner *= s[i];
  return r;
}

// The indices as row numbers, each checked against the table.
std::vector<int64_t> checked_indices(const BoundSymbol& b, const Value& idx, const Value& table,
                                     int64_t dim) {
  std::vector<int64_t> rows(idx.data.size());
  const int64_t n = table.type.shape[dim];
  for (size_t j = 0; j < rows.size(); ++j) {
    rows[j] = static_cast<int64_t>(idx.data[j]);
    if (rows[j] < 0 || rows[j] >= n)
      fail(op_name(b.op), ": index ", rows[j], " at position ", j, " is out of range for a table of ",
           n, " entries along dim ", dim, " (input ", dtype_name(table.type.dtype),
           shape_str(table.type.shape), ")");
  }
  return rows;
}

Data take(const BoundSymbol& b, const Value& a, const Value& idx) {
  const int64_t dim = b.attrs.get_int("dim");
  const Rows r = rows_around(a.type.shape, dim);
  const std::vector<int64_t> rows = checked_indices(b, idx, a, dim);
  const int64_t n = static_cast<int64_t>(rows.size());
  Data d(r.outer * n * r.inner);
  for (int64_t o = 0; o < r.outer; ++o)
    for (int64_t j = 0; j < n; ++j) {
      const double* from = a.data.data() + (o * r.rows + rows[j]) * r.inner;
      std::copy(from, from + r.inner, d.begin() + (o * n + j) * r.inner);
    }
  return d;
}

Data index_add(const BoundSymbol& b, const Value& a, const Value& idx, const Value& src) {
  const int64_t dim = b.attrs.get_int("dim");
  const Rows r = rows_around(a.type.shape, dim);
  const std::vector<int64_t> rows = checked_indices(b, idx, a, dim);
  const int64_t n = static_cast<int64_t>(rows.size());
  Data d = a.data;
  for (int64_t o = 0; o < r.outer; ++o)
    for (int64_t j = 0; j < n; ++j) {
      const double* from = src.data.data() + (o * n + j) * r.inner;
      double* to = d.data() + (o * r.rows + rows[j]) * r.inner;
      for (int64_t i = 0; i < r.inner; ++i) to[i] += from[i];
    }
  for (double& v : d) v = to_dtype(v, a.type.dtype);
  return d;
}

}  // namespace

Data run_shape_op(const BoundSymbol& b, const std::vector<Input>& in, const TensorType& out) {
  const Value& x = *in[0].value;
  switch (b.op) {
    case OpId::Reshape: return x.data;  // row-major data is already in reshape order
    case OpId::Permute: return permute(b, x, out);
    case OpId::BroadcastInDim: return broadcast_in_dim(b, x, out);
    case OpId::Slice: return slice(b, x, out);
    case OpId::Pad: return pad(b, x, out);
    case OpId::Cat: return cat(b, in, out);
    case OpId::Take: return take(b, x, *in[1].value);
    case OpId::IndexAdd: return index_add(b, x, *in[1].value, *in[2].value);
    // not shape or indexing ops: the check below
    FSDPC_ELEMENTWISE_CASES
    FSDPC_REDUCTION_CASES
    FSDPC_MATMUL_CASES
    FSDPC_CREATION_CASES
    FSDPC_COMPOSITE_CASES
    FSDPC_COLLECTIVE_CASES
    FSDPC_BUFFER_CASES
    FSDPC_FUSION_CASES
    FSDPC_MEMORY_CASES
      break;
  }
  FSDPC_CHECK(false) << op_name(b.op) << " is not a shape or indexing op";
  return {};
}

std::vector<Data> run_unpack(const BoundSymbol& b, const Value& buf) {
  std::vector<Data> parts;
  auto from = buf.data.begin();
  for (const IntList& shape : b.attrs.get_int_lists("shapes")) {
    const int64_t n = numel(shape);
    FSDPC_CHECK(buf.data.end() - from >= n) << "unpack: shapes exceed the buffer";
    parts.emplace_back(from, from + n);
    from += n;
  }
  return parts;
}

}  // namespace fsdpc::reference
