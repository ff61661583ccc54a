// A fusion region as a loop nest sees it: one iteration shape, the inputs it
// loads (each with its strides over that shape, 0 where it broadcasts), and
// its statements as scalar steps. Built from a `fusion` statement
// (passes/fuse.h); its signature is the key of the compiled-code cache, so
// equal regions (the same layer at another depth) compile once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/scalar_expr.h"
#include "ir/trace.h"

namespace fsdpc::fusion {

// What a loop loads: element i of the iteration space reads
// data[sum_d index_d * strides[d]] of the region's input `input`.
struct Load {
  int input = 0;  // index into the fusion statement's inputs
  DType dtype = DType::f32;
  std::vector<int64_t> strides;  // one per iteration dim
};

// An operand of a step: a load, an earlier step, or a literal.
struct StepArg {
  enum class Kind : uint8_t { load, step, literal } kind = Kind::literal;
  int index = 0;
  double literal = 0;
};

struct Step {
  OpId op{};
  const ScalarExpr* expr = nullptr;  // null: the step is its load (broadcast_in_dim)
  DType dtype = DType::f32;           // of its result
  std::vector<StepArg> args;
};

struct Region {
  Shape shape;  // the iteration space, row-major
  std::vector<Load> loads;
  std::vector<Step> steps;
  std::vector<int> outputs;  // the step each output of the statement is

  // Everything the generated code depends on, as text.
  std::string signature() const;
};

// Throws fsdpc::Error when the statement holds something a loop cannot run.
Region describe_region(const BoundSymbol& fusion, const std::vector<TensorType>& input_types);

}  // namespace fsdpc::fusion
