// Private to ir/meta*.cpp: the view of one op's inputs and attributes that
// every meta function uses, so each error names the op, and the per-family
// meta functions that ir/meta.cpp dispatches to.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/attr.h"
#include "ir/error.h"
#include "ir/meta.h"
#include "ir/ops.h"
#include "ir/types.h"

namespace fsdpc::meta {

using Types = std::vector<TensorType>;

// One op's inputs and attributes. Attribute getters prefix the op name to the
// errors Attrs raises, so "missing attribute 'dims'" says whose attribute.
class MetaArgs {
 public:
  MetaArgs(OpId op, const std::vector<OperandType>& inputs, const Attrs& attrs)
      : op_(op), inputs_(inputs), attrs_(attrs) {}

  OpId op() const { return op_; }
  std::string_view name() const { return op_name(op_); }
  size_t size() const { return inputs_.size(); }
  bool is_scalar(size_t i) const { return !inputs_[i].tensor.has_value(); }
  // Input i as a tensor; the caller has ruled out a scalar literal.
  const TensorType& tensor(size_t i) const;
  const TensorType* first_tensor() const;  // nullptr when all are scalars

  bool has(const std::string& key) const { return attrs_.has(key); }
  int64_t get_int(const std::string& key) const;
  double get_double(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  const std::string& get_str(const std::string& key) const;
  const IntList& get_ints(const std::string& key) const;
  const IntLists& get_int_lists(const std::string& key) const;
  DType get_dtype(const std::string& key) const;

  // Throws fsdpc::Error with "<op>: " in front of the pieces.
  template <class... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    ::fsdpc::fail(name(), ": ", parts...);
  }

 private:
  OpId op_;
  const std::vector<OperandType>& inputs_;
  const Attrs& attrs_;
};

// "f32[4, 3]": how messages show a tensor (the device only matters for
// device mismatches, which say so).
std::string desc(const TensorType& t);
std::string list_str(const IntList& l);  // "[1, 0]"

// The output of a compute op: on `like`'s device, distribution none, no future.
TensorType compute_out(const TensorType& like, Shape shape, DType dtype);

// Attribute checks shared by several families.
int64_t dim_attr(const MetaArgs& a, const std::string& key, size_t rank);
Shape shape_attr(const MetaArgs& a, const std::string& key);
int64_t nonneg_attr(const MetaArgs& a, const std::string& key);
Device device_attr(const MetaArgs& a);  // `device`: cpu or cuda:N
void require_float(const MetaArgs& a, const TensorType& t, std::string_view what);
void require_index(const MetaArgs& a, const TensorType& t, std::string_view what);
void require_same_dtype(const MetaArgs& a, const TensorType& x, std::string_view xn,
                        const TensorType& y, std::string_view yn);

// Elementwise and reductions (meta_elementwise.cpp).
TensorType meta_unary(const MetaArgs& a);
TensorType meta_convert(const MetaArgs& a);
TensorType meta_binary(const MetaArgs& a);
TensorType meta_compare(const MetaArgs& a);
TensorType meta_where(const MetaArgs& a);
TensorType meta_reduction(const MetaArgs& a);

// Shape and indexing (meta_shape.cpp).
TensorType meta_reshape(const MetaArgs& a);
TensorType meta_permute(const MetaArgs& a);
TensorType meta_broadcast_in_dim(const MetaArgs& a);
TensorType meta_slice(const MetaArgs& a);
TensorType meta_pad(const MetaArgs& a);
TensorType meta_cat(const MetaArgs& a);
TensorType meta_take(const MetaArgs& a);
TensorType meta_index_add(const MetaArgs& a);

// Matmul, creation and composites (meta_nn.cpp).
TensorType meta_matmul(const MetaArgs& a);
TensorType meta_full(const MetaArgs& a);
TensorType meta_iota(const MetaArgs& a);
TensorType meta_axis_index(const MetaArgs& a);
// The composites, each by its own rule: one switch in meta_nn.cpp, so a new
// composite's rule and its case sit together there. One type per output.
Types meta_composite(const MetaArgs& a);

// Distributed and buffers (meta_distributed.cpp).
// The collectives, send and recv, wait: one switch in meta_distributed.cpp,
// as the composites'.
TensorType meta_collective(const MetaArgs& a);
TensorType meta_pack(const MetaArgs& a);
Types meta_unpack(const MetaArgs& a);
TensorType meta_quantize(const MetaArgs& a);
TensorType meta_dequantize(const MetaArgs& a);

}  // namespace fsdpc::meta
