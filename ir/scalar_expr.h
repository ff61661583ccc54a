// The scalar semantics of the fusible ops (ir/scalar_exprs.def), parsed into
// expression trees that fusion executors lower element by element.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/ops.h"

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

// The op's per-element expression, or nullptr when it has none (not fusible
// elementwise). The table is parsed once, on first use.
const ScalarExpr* scalar_expr(OpId op);

// Whether `p` compares (its result is bool, its operands keep their dtype).
bool is_comparison(ScalarPrim p);

}  // namespace fsdpc
