// Meta functions: the output types of an op from its input types and
// attributes. They are the single source of shape rules; a bad input raises
// fsdpc::Error naming the op and the offending shapes.
#pragma once

#include <optional>
#include <vector>

#include "ir/attr.h"
#include "ir/ops.h"
#include "ir/types.h"

namespace fsdpc {

// The type of one input: a tensor, or a scalar literal.
struct OperandType {
  std::optional<TensorType> tensor;  // nullopt: scalar literal
  static OperandType of(TensorType t) { return OperandType{std::move(t)}; }
  static OperandType scalar() { return OperandType{std::nullopt}; }
};

// Checks arity and attributes and returns one TensorType per output.
std::vector<TensorType> infer_types(OpId op, const std::vector<OperandType>& inputs,
                                    const Attrs& attrs);

}  // namespace fsdpc
