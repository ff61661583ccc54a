// The claim pass: binds every statement of a trace to an executor.
#pragma once

#include <string>
#include <vector>

#include "executors/executor.h"
#include "ir/trace.h"

namespace fsdpc {

Trace claim(const Trace& trace, const std::vector<const Executor*>& executors);

// The executors a device kind runs with, in priority order: "cpu" is the CPU
// kernels and MPI collectives, "cuda" the CUDA kernels and NCCL collectives.
// Throws fsdpc::Error for an unknown name, or "cuda" in a build without the
// CUDA executor.
std::vector<const Executor*> executors_for(const std::string& name);

// `--executor auto`: "cuda" when this build has the CUDA executor and the
// runtime sees a device, else "cpu". Other names are returned as they are.
std::string resolve_executor(const std::string& name);

// Where `executor`'s tensors live: the CPU, or CUDA device 0 (each rank's
// own device: one process per GPU, and a trace is the same on every rank).
Device executor_device(const std::string& executor);

// The execution trace of a final (scheduled, del-placed) trace: claimed by
// executors_for(executor), and on "cuda" given its stream plan
// (executors/cuda/stream_plan.h). The trace's tensors must already live on
// executor_device(executor) (passes/place.h).
//
// `fusion` is "none" or "auto": auto then groups the fusible statements of
// an executor with a fusion executor into regions (passes/fuse.h), after
// claiming, before the stream plan. Other values are an fsdpc::Error.
Trace execution_trace(const Trace& trace, const std::string& executor, const std::string& fusion = "none");

// Throws fsdpc::Error unless `fusion` is "none" or "auto" (--fusion).
void check_fusion_mode(const std::string& fusion);

}  // namespace fsdpc
