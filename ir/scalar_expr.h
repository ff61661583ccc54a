// The scalar semantics of the elementwise ops (ir/scalar_exprs.def), parsed
// into expression trees: the reference executor evaluates them in float64,
// executors without a hand-written kernel for an op run them, and fusion
// executors lower them element by element.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/ops.h"
#include "ir/types.h"

namespace fsdpc {

enum class ScalarPrim : uint8_t {
  arg,       // input `arg` of the statement (a, b, c)
  constant,  // a number literal
  neg, exp, log, tanh, sqrt, sin, cos,
  add, sub, mul, div, pow, max,
  eq, ne, lt, le, gt, ge,
  select,
  cast,
};

struct ScalarExpr {
  ScalarPrim prim = ScalarPrim::constant;
  int arg = 0;        // for arg
  double value = 0;   // for constant
  std::vector<ScalarExpr> children;
};

// The op's per-element expression as generated code computes it (its
// FSDPC_SCALAR_KERNEL formulation where it has one, else its definition), or
// nullptr when it has none (not elementwise). The table is parsed once, on
// first use.
const ScalarExpr* scalar_expr(OpId op);

// The op's definition (FSDPC_SCALAR_EXPR), which the reference evaluates; the
// same as scalar_expr() unless the table gives a kernel formulation.
const ScalarExpr* scalar_definition(OpId op);

// `e` at one point, in float64: args[k] is input k. A comparison is 1 or 0,
// select tests its condition against 0, max lets a NaN win, and a cast is
// the identity (the caller rounds the result to the output dtype).
double eval_scalar(const ScalarExpr& e, const double* args);

// The `max` prim in float64: torch.maximum / torch.amax, a NaN on either side
// wins (unlike std::fmax).
double nan_max(double a, double b);

// Whether `p` compares (its result is bool, its operands keep their dtype).
bool is_comparison(ScalarPrim p);

// How an elementwise op types its operands and output, read off its
// definition's root: what the meta functions, VJP dispatch and executors
// go by for an op without its own case.
enum class ElementwiseKind : uint8_t {
  none,     // not an elementwise op with a scalar definition
  unary,    // one float operand, output of its dtype
  binary,   // two operands of one dtype (or a literal), output of that dtype
  compare,  // two operands of one dtype, bool output
  select,   // a bool condition and two values
  cast,     // convert_element_type: output dtype from the attribute
};
ElementwiseKind elementwise_kind(OpId op);

// Whether an executor's kernel generated from the op's scalar expression (the
// CPU's interpreted one, CUDA's compiled one) runs it for output dtype `out`:
// f32 values with a bool condition, or a comparison of f32 to bool.
bool runs_generated(OpId op, DType out);

}  // namespace fsdpc
