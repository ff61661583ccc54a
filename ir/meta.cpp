// infer_types: the rules every op shares (arity, scalar literals, futures,
// one device), then a dispatch to the per-family meta functions in
// ir/meta_*.cpp. Shared helpers of those files live here too.
#include "ir/meta.h"

#include "ir/meta_rules.h"
#include "ir/scalar_expr.h"

namespace fsdpc {

namespace meta {

const TensorType& MetaArgs::tensor(size_t i) const {
  FSDPC_CHECK(i < inputs_.size() && inputs_[i].tensor) << name() << ": input " << i;
  return *inputs_[i].tensor;
}

const TensorType* MetaArgs::first_tensor() const {
  for (const OperandType& in : inputs_)
    if (in.tensor) return &*in.tensor;
  return nullptr;
}

// Each getter forwards to Attrs and names the op in front of its error.
#define FSDPC_META_GETTER(Ret, getter)                 \
  Ret MetaArgs::getter(const std::string& key) const { \
    try {                                              \
      return attrs_.getter(key);                       \
    } catch (const Error& e) {                         \
      fail(e.what());                                  \
    }                                                  \
  }
FSDPC_META_GETTER(int64_t, get_int)
FSDPC_META_GETTER(double, get_double)
FSDPC_META_GETTER(bool, get_bool)
FSDPC_META_GETTER(const std::string&, get_str)
FSDPC_META_GETTER(const IntList&, get_ints)
FSDPC_META_GETTER(const IntLists&, get_int_lists)
FSDPC_META_GETTER(DType, get_dtype)
#undef FSDPC_META_GETTER

std::string desc(const TensorType& t) {
  return std::string(dtype_name(t.dtype)) + shape_str(t.shape);
}

std::string list_str(const IntList& l) { return shape_str(l); }

TensorType compute_out(const TensorType& like, Shape shape, DType dtype) {
  TensorType t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  t.device = like.device;
  return t;
}

int64_t dim_attr(const MetaArgs& a, const std::string& key, size_t rank) {
  int64_t d = a.get_int(key);
  if (d < 0 || d >= static_cast<int64_t>(rank))
    a.fail(key, " ", d, " out of range for rank ", rank);
  return d;
}

Shape shape_attr(const MetaArgs& a, const std::string& key) {
  const IntList& s = a.get_ints(key);
  for (int64_t d : s)
    if (d < 0) a.fail(key, " ", list_str(s), " has a negative size");
  return s;
}

int64_t nonneg_attr(const MetaArgs& a, const std::string& key) {
  int64_t v = a.get_int(key);
  if (v < 0) a.fail(key, " ", v, " is negative");
  return v;
}

Device device_attr(const MetaArgs& a) {
  const std::string& s = a.get_str("device");
  auto d = parse_device(s);
  if (!d) a.fail("device '", s, "' is not a device (expected cpu or cuda:N)");
  return *d;
}

void require_float(const MetaArgs& a, const TensorType& t, std::string_view what) {
  if (!is_float(t.dtype))
    a.fail(what, " is ", desc(t), "; expected a float dtype (f32, f16, bf16, f64)");
}

void require_index(const MetaArgs& a, const TensorType& t, std::string_view what) {
  if (!is_index(t.dtype)) a.fail(what, " is ", desc(t), "; expected an index dtype (i32 or i64)");
}

void require_same_dtype(const MetaArgs& a, const TensorType& x, std::string_view xn,
                        const TensorType& y, std::string_view yn) {
  if (x.dtype != y.dtype)
    a.fail("dtypes differ: ", xn, " is ", desc(x), ", ", yn, " is ", desc(y));
}

namespace {

void check_arity(const MetaArgs& a) {
  const OpInfo& info = op_info(a.op());
  const int n = static_cast<int>(a.size());
  auto inputs = [](int k) { return k == 1 ? " input" : " inputs"; };
  if (info.max_inputs < 0) {
    if (n < info.min_inputs)
      a.fail("expects at least ", info.min_inputs, inputs(info.min_inputs), ", got ", n);
  } else if (n < info.min_inputs || n > info.max_inputs) {
    if (info.min_inputs == info.max_inputs)
      a.fail("expects ", info.min_inputs, inputs(info.min_inputs), ", got ", n);
    a.fail("expects ", info.min_inputs, " to ", info.max_inputs, " inputs, got ", n);
  }
}

// Scalar literals, futures and devices: the rules of docs/ir.md that hold
// for every op.
void check_operands(const MetaArgs& a) {
  const bool elementwise = op_info(a.op()).category == OpCategory::elementwise;
  for (size_t i = 0; i < a.size(); ++i)
    if (a.is_scalar(i) && !elementwise)
      a.fail("input ", i, " is a scalar literal; only elementwise ops take scalars");
  const TensorType* first = a.first_tensor();
  if (a.size() > 0 && !first)
    a.fail("all inputs are scalar literals; at least one must be a tensor");
  size_t first_index = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a.is_scalar(i)) continue;
    const TensorType& t = a.tensor(i);
    if (&t == first) first_index = i;
    if (t.future && a.op() != OpId::Wait)
      a.fail("input ", i, " is a future; only wait may consume it");
    if (t.device != first->device)
      a.fail("inputs on different devices: input ", first_index, " is on ",
             device_name(first->device), ", input ", i, " is on ", device_name(t.device));
  }
}

// An elementwise op is typed by the kind its scalar definition has
// (ir/scalar_exprs.def), so a new one needs no case here.
TensorType meta_elementwise(const MetaArgs& a) {
  switch (elementwise_kind(a.op())) {
    case ElementwiseKind::unary: return meta_unary(a);
    case ElementwiseKind::binary: return meta_binary(a);
    case ElementwiseKind::compare: return meta_compare(a);
    case ElementwiseKind::select: return meta_where(a);
    case ElementwiseKind::cast: return meta_convert(a);
    case ElementwiseKind::none: break;
  }
  FSDPC_CHECK(false) << op_name(a.op()) << " is elementwise but has no scalar definition";
  return {};
}

Types dispatch(const MetaArgs& a) {
  if (op_info(a.op()).category == OpCategory::elementwise) return {meta_elementwise(a)};
  switch (a.op()) {
    case OpId::Sum: case OpId::Amax: return {meta_reduction(a)};
    case OpId::Reshape: return {meta_reshape(a)};
    case OpId::Permute: return {meta_permute(a)};
    case OpId::BroadcastInDim: return {meta_broadcast_in_dim(a)};
    case OpId::Slice: return {meta_slice(a)};
    case OpId::Pad: return {meta_pad(a)};
    case OpId::Cat: return {meta_cat(a)};
    case OpId::Take: return {meta_take(a)};
    case OpId::IndexAdd: return {meta_index_add(a)};
    case OpId::Matmul: return {meta_matmul(a)};
    case OpId::Full: return {meta_full(a)};
    case OpId::Iota: return {meta_iota(a)};
    case OpId::AxisIndex: return {meta_axis_index(a)};
    FSDPC_COMPOSITE_CASES return meta_composite(a);
    FSDPC_COLLECTIVE_CASES return {meta_collective(a)};
    case OpId::Pack: return {meta_pack(a)};
    case OpId::Unpack: return meta_unpack(a);
    case OpId::Quantize: return {meta_quantize(a)};
    case OpId::Dequantize: return {meta_dequantize(a)};
    case OpId::Del: return {};  // frees its inputs; defines nothing
    case OpId::Fusion:
      // Only its statements know its outputs: verify() checks them there.
      a.fail("a region's output types come from its statements");
    // the elementwise ops: dispatched above, by category
    FSDPC_ELEMENTWISE_CASES
      break;
  }
  FSDPC_CHECK(false) << "op id " << static_cast<int>(a.op()) << " outside ops.def";
  return {};
}

}  // namespace
}  // namespace meta

DType linear_cross_entropy_loss_dtype(DType h) { return dtype_size(h) < 4 ? DType::f32 : h; }

std::vector<TensorType> infer_types(OpId op, const std::vector<OperandType>& inputs,
                                    const Attrs& attrs) {
  const meta::MetaArgs a(op, inputs, attrs);
  meta::check_arity(a);
  meta::check_operands(a);
  return meta::dispatch(a);
}

}  // namespace fsdpc
