// VJP rules: the backward of every op in ir/ops.def, emitted through
// TraceBuilder so every backward statement is shape-checked. The grad pass
// (passes/grad.h) walks a trace in reverse and calls vjp() per statement.
#pragma once

#include <optional>
#include <vector>

#include "ir/builder.h"
#include "ir/trace.h"

namespace fsdpc {

// One cotangent per output (or input) of a statement; nullopt: none. A
// cotangent has its value's shape and dtype and is never a future.
using Cotangents = std::vector<std::optional<Proxy>>;

// Emits into `b` the cotangents of `bsym`'s inputs from those of its outputs
// (`out_cts`, one per output, at least one set). `needs[i]` says whether
// input i wants a cotangent; the result has one entry per input, nullopt
// where none is needed or none exists (scalar literals, integer inputs).
// Composites use their own rules, never their decompositions. Throws
// fsdpc::Error for an op without a VJP (broadcast, send). recv has no
// inputs, so it gets no cotangents, like axis_index.
Cotangents vjp(TraceBuilder& b, const BoundSymbol& bsym, const Cotangents& out_cts,
               const std::vector<bool>& needs);

// Forward lowering of synchronize (docs/ir.md "Distributed"): all_gather +
// wait (+ slice off the padding) of a fully_sharded input; the input itself
// when it is replicated. Returns the value that stands for the output.
Proxy lower_synchronize(TraceBuilder& b, const BoundSymbol& sync);

// Backward of synchronize for the summed cotangent `g` of its output:
// div by the data-parallel world (size * replicate_size), then pad +
// reduce_scatter + wait (sharded; + all_reduce + wait over replicate_group
// for hybrid) or all_reduce + wait (replicated). Returns the gradient of the
// input: the shard's shape and fully_sharded for a sharded input.
Proxy reduce_synchronized_grad(TraceBuilder& b, const BoundSymbol& sync, const Proxy& g);
// The same where the synchronize's input (of type `input`) is not a value of
// `b`'s trace: a step that reduces gradients outside the backward
// (passes/gather_once.h).
Proxy reduce_synchronized_grad(TraceBuilder& b, const BoundSymbol& sync, const TensorType& input, const Proxy& g);

}  // namespace fsdpc
