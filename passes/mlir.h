// A textual MLIR view of a trace, so MLIR tools (mlir-opt, a future
// lowering) can read what fsdpc computes. A view only: nothing reads it back.
#pragma once

#include <string>

#include "ir/trace.h"

namespace fsdpc {

// One `func.func @<trace name>` that `mlir-opt --allow-unregistered-dialect`
// parses and verifies:
//  - types: tensor<64x64xf32>, tensor<f32> for 0-d; bool is i1. A future is
//    !fsdpc.future<tensor<...>>. Argument attributes carry what the tensor
//    type cannot: {fsdpc.param = "h.0.w", fsdpc.dist = "fully_sharded",
//    fsdpc.device = "cuda:0"}.
//  - elementwise ops map to arith/math where one op fits the dtype (addf,
//    addi, maxf, cmpf olt, select, math.exp, ...); a scalar literal becomes an
//    `arith.constant dense<...>` of its operand's type, named %<out>.c<i>.
//  - every other op is a generic op of the unregistered fsdpc dialect:
//    %t0 = "fsdpc.linear"(%x, %w) : (...) -> tensor<64x64xf32>, attributes as
//    MLIR attributes (64 : i64, 1.0e-05 : f64, true, "dp", [1 : i64, 0 : i64]);
//    non-finite floats by bit pattern (0xFFF0000000000000 : f64 is -inf).
//  - del is "fsdpc.del"(%a, %b) : (...) -> (); returns are flattened into
//    func.return. Sub-symbols are left out (the composite stands for them).
//  - values keep their trace names (%t0, %x, %t_0_weight); a name MLIR cannot
//    spell becomes %v.<n>.
// Throws fsdpc::Error when the trace uses a name it does not define.
std::string trace_to_mlir(const Trace& trace);

}  // namespace fsdpc
