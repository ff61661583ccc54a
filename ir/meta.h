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

// The dtype of linear_cross_entropy's loss for activations of dtype `h`: h's,
// widened to f32 when narrower. The unfused head under autocast runs linear
// in bf16 and cross_entropy in f32 on its cast logits; the fused op keeps
// that loss, where a bf16 loss would round away the third digit.
DType linear_cross_entropy_loss_dtype(DType h);

}  // namespace fsdpc
