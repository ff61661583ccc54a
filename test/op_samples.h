// The op-sample table: one row per op of ir/ops.def, shared by the per-op
// tests so that none keeps an op list of its own. A row is the op's meta case
// (operand types on cuda:1 and the output types docs/ir.md gives for them,
// worked out by hand: meta_sweep_test) and, for an elementwise op, where its
// numeric tests draw each input. The CPU, VJP, fusion and GPU kernel tests
// run every elementwise op by its kind (elementwise_ops()), so a new
// elementwise op is tested everywhere once it has its row; the row is
// required, since op_sample()'s switch has no default.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "ir/meta.h"
#include "ir/scalar_expr.h"

namespace fsdpc::test {

// Where a numeric test draws an input: anywhere (about [-3, 3]), or in
// about [0.5, 2] where the op's value or gradient needs it (log, a divisor,
// pow's base).
enum class Domain : uint8_t { any, positive };

struct OpSample {
  OpSample() = default;
  OpSample(std::vector<OperandType> in, Attrs a, std::vector<TensorType> out, std::vector<Domain> d = {})
      : inputs(std::move(in)), attrs(std::move(a)), outputs(std::move(out)), domains(std::move(d)) {}

  std::vector<OperandType> inputs;
  Attrs attrs;
  std::vector<TensorType> outputs;  // as docs/ir.md gives them for `inputs`
  std::vector<Domain> domains;      // per input of a numeric test; missing: any

  Domain domain(size_t input) const { return input < domains.size() ? domains[input] : Domain::any; }
};

OpSample op_sample(OpId op);

// The elementwise ops of ops.def, in table order: all, or those whose scalar
// definition is of `kind` (ir/scalar_exprs.def).
std::vector<OpId> elementwise_ops();
std::vector<OpId> elementwise_ops(ElementwiseKind kind);

}  // namespace fsdpc::test
