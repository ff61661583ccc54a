// The claim pass: binds every statement of a trace to an executor.
#pragma once

#include <string>
#include <vector>

#include "executors/executor.h"
#include "ir/trace.h"

namespace fsdpc {

Trace claim(const Trace& trace, const std::vector<const Executor*>& executors);

// The executors a device kind runs with, in priority order: "cpu" is the CPU
// kernels and MPI collectives. Throws fsdpc::Error for an unknown or
// unavailable name.
std::vector<const Executor*> executors_for(const std::string& name);

}  // namespace fsdpc
