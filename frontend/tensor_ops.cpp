// The ops a forward function calls. Each normalises PyTorch-style arguments
// (negative dims, -1 in shapes, implicit broadcasting) into the canonical
// form of the IR and records one op; the meta functions do the checking.
#include <algorithm>

#include "frontend/tensor.h"
#include "ir/error.h"

namespace fsdpc {

namespace {

int64_t norm_dim(int64_t d, int64_t rank, std::string_view op) {
  if (d < -rank || d >= rank) fail(op, ": dim ", d, " out of range for rank ", rank);
  return d < 0 ? d + rank : d;
}

std::vector<int64_t> norm_dims(std::vector<int64_t> dims, int64_t rank, std::string_view op) {
  for (int64_t& d : dims) d = norm_dim(d, rank, op);
  std::sort(dims.begin(), dims.end());
  if (std::adjacent_find(dims.begin(), dims.end()) != dims.end())
    fail(op, ": dims ", shape_str(dims), " repeat a dimension");
  return dims;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      fail(op, ": shapes ", shape_str(a), " and ", shape_str(b), " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor binary(OpId op, const Tensor& a, const Tensor& b) {
  Shape out = broadcast_shapes(a.shape(), b.shape(), op_name(op));
  Tensor a2 = broadcast_to(a, out);
  Tensor b2 = broadcast_to(b, out);
  return a.tracer().record(op, {Operand::of(a2.name()), Operand::of(b2.name())});
}

Tensor binary(OpId op, const Tensor& a, double b) {
  return a.tracer().record(op, {Operand::of(a.name()), Operand::lit(b)});
}

Tensor unary(OpId op, const Tensor& a) { return a.tracer().record(op, {Operand::of(a.name())}); }

Tensor reduce(OpId op, const Tensor& a, std::vector<int64_t> dims, bool keepdim) {
  dims = norm_dims(std::move(dims), a.rank(), op_name(op));
  Tensor r = a.tracer().record(op, {Operand::of(a.name())}, Attrs{{"dims", dims}});
  if (!keepdim) return r;
  Shape kept = a.shape();
  for (int64_t d : dims) kept[static_cast<size_t>(d)] = 1;
  return reshape(r, kept);
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary(OpId::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(OpId::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(OpId::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(OpId::Div, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(OpId::Maximum, a, b); }
Tensor eq(const Tensor& a, const Tensor& b) { return binary(OpId::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary(OpId::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary(OpId::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary(OpId::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary(OpId::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary(OpId::Ge, a, b); }
Tensor add(const Tensor& a, double b) { return binary(OpId::Add, a, b); }
Tensor sub(const Tensor& a, double b) { return binary(OpId::Sub, a, b); }
Tensor mul(const Tensor& a, double b) { return binary(OpId::Mul, a, b); }
Tensor div(const Tensor& a, double b) { return binary(OpId::Div, a, b); }
Tensor pow(const Tensor& a, double exponent) { return binary(OpId::Pow, a, exponent); }
Tensor maximum(const Tensor& a, double b) { return binary(OpId::Maximum, a, b); }
Tensor neg(const Tensor& a) { return unary(OpId::Neg, a); }
Tensor exp(const Tensor& a) { return unary(OpId::Exp, a); }
Tensor log(const Tensor& a) { return unary(OpId::Log, a); }
Tensor tanh(const Tensor& a) { return unary(OpId::Tanh, a); }
Tensor sqrt(const Tensor& a) { return unary(OpId::Sqrt, a); }
Tensor rsqrt(const Tensor& a) { return unary(OpId::Rsqrt, a); }
Tensor sin(const Tensor& a) { return unary(OpId::Sin, a); }
Tensor cos(const Tensor& a) { return unary(OpId::Cos, a); }
Tensor sigmoid(const Tensor& a) { return unary(OpId::Sigmoid, a); }
Tensor relu(const Tensor& a) { return maximum(a, 0.0); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  Shape out = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor c2 = broadcast_to(cond, out), a2 = broadcast_to(a, out), b2 = broadcast_to(b, out);
  return cond.tracer().record(OpId::Where,
                              {Operand::of(c2.name()), Operand::of(a2.name()), Operand::of(b2.name())});
}

Tensor where(const Tensor& cond, const Tensor& a, double b) {
  Shape out = broadcast_shapes(cond.shape(), a.shape(), "where");
  Tensor c2 = broadcast_to(cond, out), a2 = broadcast_to(a, out);
  return cond.tracer().record(OpId::Where,
                              {Operand::of(c2.name()), Operand::of(a2.name()), Operand::lit(b)});
}

Tensor to_dtype(const Tensor& a, DType dtype) {
  if (a.dtype() == dtype) return a;
  return a.tracer().record(OpId::ConvertElementType, {Operand::of(a.name())},
                           Attrs{{"dtype", std::string(dtype_name(dtype))}});
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, b); }
Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
Tensor operator/(const Tensor& a, double b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }

Tensor sum(const Tensor& a, std::vector<int64_t> dims, bool keepdim) {
  return reduce(OpId::Sum, a, std::move(dims), keepdim);
}

Tensor amax(const Tensor& a, std::vector<int64_t> dims, bool keepdim) {
  return reduce(OpId::Amax, a, std::move(dims), keepdim);
}

Tensor mean(const Tensor& a, std::vector<int64_t> dims, bool keepdim) {
  std::vector<int64_t> nd = norm_dims(dims, a.rank(), "mean");
  int64_t count = 1;
  for (int64_t d : nd) count *= a.shape()[static_cast<size_t>(d)];
  return div(sum(a, nd, keepdim), static_cast<double>(count));
}

Tensor reshape(const Tensor& a, Shape shape) {
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer_at >= 0) fail("reshape: only one -1 allowed in ", shape_str(shape));
      infer_at = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      fail("reshape: negative size in ", shape_str(shape));
    } else {
      known *= shape[i];
    }
  }
  if (infer_at >= 0) {
    int64_t total = numel(a.shape());
    if (known == 0 || total % known != 0)
      fail("reshape: cannot infer -1 in ", shape_str(shape), " for ", numel(a.shape()), " elements");
    shape[static_cast<size_t>(infer_at)] = total / known;
  }
  if (shape == a.shape()) return a;
  return a.tracer().record(OpId::Reshape, {Operand::of(a.name())}, Attrs{{"shape", shape}});
}

Tensor permute(const Tensor& a, std::vector<int64_t> dims) {
  for (int64_t& d : dims) d = norm_dim(d, a.rank(), "permute");
  return a.tracer().record(OpId::Permute, {Operand::of(a.name())}, Attrs{{"dims", dims}});
}

Tensor transpose(const Tensor& a, int64_t dim0, int64_t dim1) {
  std::vector<int64_t> dims(static_cast<size_t>(a.rank()));
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = static_cast<int64_t>(i);
  std::swap(dims[static_cast<size_t>(norm_dim(dim0, a.rank(), "transpose"))],
            dims[static_cast<size_t>(norm_dim(dim1, a.rank(), "transpose"))]);
  return permute(a, dims);
}

Tensor broadcast_to(const Tensor& a, const Shape& shape) {
  if (a.shape() == shape) return a;
  if (a.shape().size() > shape.size())
    fail("cannot broadcast ", shape_str(a.shape()), " to ", shape_str(shape), ": too many dims");
  std::vector<int64_t> bdims;
  size_t off = shape.size() - a.shape().size();
  for (size_t i = 0; i < a.shape().size(); ++i) {
    int64_t d = a.shape()[i];
    if (d != 1 && d != shape[off + i])
      fail("cannot broadcast ", shape_str(a.shape()), " to ", shape_str(shape));
    bdims.push_back(static_cast<int64_t>(off + i));
  }
  return a.tracer().record(OpId::BroadcastInDim, {Operand::of(a.name())},
                           Attrs{{"shape", shape}, {"broadcast_dims", bdims}});
}

Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end, int64_t step) {
  dim = norm_dim(dim, a.rank(), "slice");
  if (step < 1) fail("slice: step must be >= 1, got ", step);
  int64_t n = a.shape()[static_cast<size_t>(dim)];
  auto clamp = [n](int64_t i) { return std::clamp(i < 0 ? i + n : i, int64_t{0}, n); };
  start = clamp(start);
  end = std::max(start, clamp(end));
  std::vector<int64_t> starts(a.shape().size(), 0), ends = a.shape(), strides(a.shape().size(), 1);
  starts[static_cast<size_t>(dim)] = start;
  ends[static_cast<size_t>(dim)] = end;
  strides[static_cast<size_t>(dim)] = step;
  return a.tracer().record(OpId::Slice, {Operand::of(a.name())},
                           Attrs{{"starts", starts}, {"ends", ends}, {"strides", strides}});
}

Tensor pad(const Tensor& a, std::vector<int64_t> lo, std::vector<int64_t> hi, double value) {
  return a.tracer().record(OpId::Pad, {Operand::of(a.name())},
                           Attrs{{"lo", lo}, {"hi", hi}, {"value", value}});
}

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  if (xs.empty()) fail("cat: needs at least one tensor");
  std::vector<Operand> ins;
  for (const Tensor& x : xs) ins.push_back(Operand::of(x.name()));
  return xs[0].tracer().record(OpId::Cat, std::move(ins),
                               Attrs{{"dim", norm_dim(dim, xs[0].rank(), "cat")}});
}

std::vector<Tensor> split(const Tensor& a, int64_t size, int64_t dim) {
  int64_t n = a.size(dim);
  if (size <= 0 || n % size != 0) fail("split: dim of size ", n, " does not split into chunks of ", size);
  std::vector<Tensor> out;
  for (int64_t s = 0; s < n; s += size) out.push_back(slice(a, dim, s, s + size));
  return out;
}

Tensor take(const Tensor& a, const Tensor& idx, int64_t dim) {
  return a.tracer().record(OpId::Take, {Operand::of(a.name()), Operand::of(idx.name())},
                           Attrs{{"dim", norm_dim(dim, a.rank(), "take")}});
}

Tensor index_add(const Tensor& a, const Tensor& idx, const Tensor& src, int64_t dim) {
  return a.tracer().record(OpId::IndexAdd,
                           {Operand::of(a.name()), Operand::of(idx.name()), Operand::of(src.name())},
                           Attrs{{"dim", norm_dim(dim, a.rank(), "index_add")}});
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  return a.tracer().record(OpId::Matmul, {Operand::of(a.name()), Operand::of(b.name())});
}

Tensor full(Tracer& tr, Shape shape, double value, DType dtype) {
  return tr.record(OpId::Full, {},
                   Attrs{{"shape", shape}, {"value", value}, {"dtype", std::string(dtype_name(dtype))},
                         {"device", device_name(tr.device())}});
}

Tensor zeros(Tracer& tr, Shape shape, DType dtype) { return full(tr, std::move(shape), 0.0, dtype); }

Tensor arange(Tracer& tr, int64_t length, DType dtype) {
  return tr.record(OpId::Iota, {},
                   Attrs{{"length", length}, {"dtype", std::string(dtype_name(dtype))},
                         {"device", device_name(tr.device())}});
}

Tensor linear(const Tensor& x, const Tensor& w) {
  return x.tracer().record(OpId::Linear, {Operand::of(x.name()), Operand::of(w.name())});
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  return x.tracer().record(OpId::Linear,
                           {Operand::of(x.name()), Operand::of(w.name()), Operand::of(b.name())});
}

Tensor gelu(const Tensor& x) {
  return x.tracer().record(OpId::Gelu, {Operand::of(x.name())}, Attrs{{"approximate", std::string("tanh")}});
}

Tensor softmax(const Tensor& x, int64_t dim) {
  return x.tracer().record(OpId::Softmax, {Operand::of(x.name())},
                           Attrs{{"dim", norm_dim(dim, x.rank(), "softmax")}});
}

Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  return x.tracer().record(OpId::LayerNorm,
                           {Operand::of(x.name()), Operand::of(w.name()), Operand::of(b.name())},
                           Attrs{{"eps", eps}});
}

Tensor silu(const Tensor& x) { return x.tracer().record(OpId::Silu, {Operand::of(x.name())}); }

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  return x.tracer().record(OpId::RmsNorm, {Operand::of(x.name()), Operand::of(weight.name())},
                           Attrs{{"eps", eps}});
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    bool is_causal, double scale) {
  return q.tracer().record(OpId::ScaledDotProductAttention,
                           {Operand::of(q.name()), Operand::of(k.name()), Operand::of(v.name())},
                           Attrs{{"is_causal", is_causal}, {"scale", scale}});
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) {
  return logits.tracer().record(OpId::CrossEntropy,
                                {Operand::of(logits.name()), Operand::of(targets.name())});
}

}  // namespace fsdpc
