// Per-op math of the reference executor for the elementwise ops, reductions,
// matmul, creation and the rank-local buffer/future ops; shape and indexing
// ops live in reference_shape.cpp. Definitions follow PyTorch in float64.
#include <cmath>
#include <limits>

#include "executors/reference/reference_internal.h"
#include "ir/scalar_expr.h"

namespace fsdpc::reference {

namespace {

// Element i of an elementwise operand; a scalar literal is the same everywhere.
double at(const Input& in, int64_t i) { return in.is_scalar() ? in.scalar : in.value->data[i]; }

// Every elementwise op is its definition in ir/scalar_exprs.def, evaluated
// in float64 and rounded to the output dtype.
Data elementwise(const BoundSymbol& b, const std::vector<Input>& in, const TensorType& out) {
  const ScalarExpr* e = scalar_definition(b.op);
  FSDPC_CHECK(e) << op_name(b.op) << " has no scalar definition";
  FSDPC_CHECK(in.size() <= 3) << op_name(b.op) << " with " << in.size() << " inputs";
  const int64_t n = numel(out.shape);
  Data d(n);
  double args[3] = {0, 0, 0};
  for (int64_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < in.size(); ++k) args[k] = at(in[k], i);
    d[i] = to_dtype(eval_scalar(*e, args), out.dtype);
  }
  return d;
}

// sum / amax over `dims`: every input element is folded into the output
// element it lands on; reduced dims get output stride 0.
Data reduce(const BoundSymbol& b, const Value& x, const TensorType& out) {
  const IntList& dims = b.attrs.get_ints("dims");
  const Strides out_strides = row_major_strides(out.shape);
  Strides dst(x.type.shape.size(), 0);
  size_t next = 0, kept = 0;
  for (size_t i = 0; i < dst.size(); ++i) {
    if (next < dims.size() && dims[next] == static_cast<int64_t>(i))
      ++next;
    else
      dst[i] = out_strides[kept++];
  }
  const bool is_sum = b.op == OpId::Sum;
  // amax over nothing is -inf, the identity of max (PyTorch raises instead).
  Data d(numel(out.shape), is_sum ? 0.0 : -std::numeric_limits<double>::infinity());
  const Data& src = x.data;
  if (is_sum)
    walk2(x.type.shape, row_major_strides(x.type.shape), 0, dst, 0, [&](int64_t s, int64_t o) { d[o] += src[s]; });
  else
    walk2(x.type.shape, row_major_strides(x.type.shape), 0, dst, 0,
          [&](int64_t s, int64_t o) { d[o] = nan_max(d[o], src[s]); });
  for (double& v : d) v = to_dtype(v, out.dtype);
  return d;
}

// a [..., M, K] @ b [..., K, N] (or a 2-D b shared by every batch).
Data matmul(const Value& a, const Value& b, const TensorType& out) {
  const Shape& as = a.type.shape;
  const Shape& bs = b.type.shape;
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < as.size(); ++i) batch *= as[i];
  const int64_t b_step = bs.size() == 2 ? 0 : k * n;
  Data d(numel(out.shape), 0.0);
  for (int64_t p = 0; p < batch; ++p) {
    const double* ap = a.data.data() + p * m * k;
    const double* bp = b.data.data() + p * b_step;
    double* dp = d.data() + p * m * n;
    // i-k-j order walks b and the output row by row.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t kk = 0; kk < k; ++kk) {
        const double aik = ap[i * k + kk];
        const double* brow = bp + kk * n;
        double* drow = dp + i * n;
        for (int64_t j = 0; j < n; ++j) drow[j] += aik * brow[j];
      }
  }
  return d;
}

Data pack(const std::vector<Input>& in) {
  Data d;
  for (const Input& x : in) d.insert(d.end(), x.value->data.begin(), x.value->data.end());
  return d;
}

}  // namespace

Data run_prim(const BoundSymbol& b, const std::vector<Input>& in, const TensorType& out) {
  switch (op_info(b.op).category) {
    case OpCategory::elementwise: return elementwise(b, in, out);
    case OpCategory::reduction: return reduce(b, *in[0].value, out);
    case OpCategory::shape:
    case OpCategory::indexing: return run_shape_op(b, in, out);
    default: break;
  }
  if (b.op == OpId::Wait) return in[0].value->data;  // the simulated collective already finished
  switch (b.op) {
    case OpId::Matmul: return matmul(*in[0].value, *in[1].value, out);
    case OpId::Full: return Data(numel(out.shape), to_dtype(b.attrs.get_double("value"), out.dtype));
    case OpId::Iota: {
      Data d(numel(out.shape));
      for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<double>(i);
      return d;
    }
    case OpId::Pack: return pack(in);
    case OpId::Quantize: return quantize(b, *in[0].value);
    case OpId::Dequantize: return dequantize(b, *in[0].value, out);
    // elementwise, reduction, shape and indexing ops: run above, by category;
    // the others (wait: above) are not rank-local prims: the check below
    FSDPC_ELEMENTWISE_CASES
    FSDPC_REDUCTION_CASES
    FSDPC_SHAPE_CASES
    FSDPC_INDEXING_CASES
    FSDPC_COMPOSITE_CASES
    FSDPC_COLLECTIVE_CASES
    FSDPC_FUSION_CASES
    FSDPC_MEMORY_CASES
    case OpId::AxisIndex: case OpId::Unpack:
      break;
  }
  FSDPC_CHECK(false) << op_name(b.op) << " is not a rank-local prim";
  return {};
}

}  // namespace fsdpc::reference
