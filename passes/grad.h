// The autodiff pass: one joint forward+backward trace, with synchronize
// lowered to its collectives (docs/design.md "Data flow").
#pragma once

#include <string>
#include <vector>

#include "ir/trace.h"

namespace fsdpc {

struct GradOptions {
  // false: PyTorch's `no_sync` — stop at the synchronize and return the
  // unsharded local gradients (not divided, not reduced).
  bool sync_grads = true;
  // true: one extra argument per synchronized parameter, `acc_<param proxy
  // name>` (unsharded, full shape), added to its local gradient before
  // synchronisation (the last micro-batch after no_sync ones).
  bool accumulate_grads = false;
  // Non-parameter float arguments whose gradient is also returned, after
  // the parameters' (pipeline parallelism: a stage sends its input's
  // gradient to the stage before it).
  std::vector<std::string> input_grads;
};

// Pre: the trace's first return is a float tensor, normally the scalar
// loss; every op has a VJP rule (passes/vjp_rules.h).
// Post: the joint trace ("# Constructed by grad"): args = the input trace's
// args, then any acc_* args, then `cotangent` (the first return's type);
// the forward statements first, in order and with their names (synchronize
// lowered, del dropped), then the backward; returns (original return
// items..., (gradient of each parameter with requires_grad, in argument
// order, then of each input_grads argument)). Throws fsdpc::Error when the
// first return is not a float tensor, an op has no VJP, or an input_grads
// name is not a float non-parameter argument.
Trace grad(const Trace& trace, const GradOptions& options = {});

// The name of the joint trace's argument that carries the loss's cotangent
// (a backward's, or after head_grad_forward a forward's, by the same name).
inline constexpr const char* kCotangentArg = "cotangent";

}  // namespace fsdpc
