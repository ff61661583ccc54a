// A fusion region as a loop nest sees it: one iteration shape, whose
// innermost dimension is a row, the inputs it loads (each with its strides
// over that shape, 0 where it broadcasts), and its statements as steps. A
// step is per element of the iteration space, or per row (its shape is the
// iteration shape without the innermost dimension): a sum or amax over the
// innermost dimension turns elements into a row value, and a broadcast back
// turns a row value into elements, so layer_norm, softmax and their
// backward rules are one region. Built from a `fusion` statement
// (passes/fuse.h); its signature is the key of the compiled-code cache, so
// equal regions (the same layer at another depth) compile once. bf16 is a
// storage dtype here: a bf16 load is widened to f32, a bf16 step (a convert,
// or a broadcast of a bf16 input) is an f32 value rounded to bf16, and only
// converts and broadcasts read or define bf16, so all arithmetic is f32.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/scalar_expr.h"
#include "ir/trace.h"

namespace fsdpc::fusion {

// What a loop loads: element i of the iteration space reads
// data[sum_d index_d * strides[d]] of the region's input `input`. An inner
// stride of 0 makes it one value per row.
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

enum class StepKind : uint8_t {
  expr,   // the op's scalar expression over its args
  load,   // its one arg, a load (broadcast_in_dim of an input)
  splat,  // its one arg, a row step, at every element of the row
  sum,    // a row: the sum of its one arg over the row (accumulated in f64)
  amax,   // a row: the largest of its one arg over the row (NaN wins)
};

struct Step {
  OpId op{};
  StepKind kind = StepKind::expr;
  const ScalarExpr* expr = nullptr;  // for expr
  DType dtype = DType::f32;          // of its result
  bool row = false;                  // one value per row, not per element
  std::vector<StepArg> args;
};

struct Region {
  Shape shape;  // the iteration space, row-major; its last dim is the row
  std::vector<Load> loads;
  std::vector<Step> steps;
  std::vector<int> outputs;  // the step each output of the statement is

  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
  int64_t rows() const;  // numel(shape) / cols, also when cols is 0

  // Everything the generated code depends on, as text.
  std::string signature() const;
};

// Throws fsdpc::Error when the statement holds something a loop cannot run.
Region describe_region(const BoundSymbol& fusion, const std::vector<TensorType>& input_types);

// An elementwise statement `b` alone as a region over its elements in one
// flat dimension, so an executor without a kernel of its own for the op runs
// it as generated code, and every shape of the same size shares that code.
// `input_types[i]` is b's input i (nullptr for a scalar literal, which stays
// inside the region). `tensor_inputs` are the indices of b's inputs that
// the region takes, in order.
struct FlatStatement {
  BoundSymbol fusion;
  std::vector<TensorType> input_types;  // of fusion's inputs
  std::vector<size_t> tensor_inputs;
};
FlatStatement flat_statement(const BoundSymbol& b, const std::vector<const TensorType*>& input_types);

}  // namespace fsdpc::fusion
