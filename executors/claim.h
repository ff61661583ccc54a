// The claim pass: binds every statement of a trace to an executor.
#pragma once

#include <vector>

#include "executors/executor.h"
#include "ir/trace.h"

namespace fsdpc {

Trace claim(const Trace& trace, const std::vector<const Executor*>& executors);

}  // namespace fsdpc
