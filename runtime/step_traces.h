// Every trace a training step runs, for each kind of micro-batch: what
// fsdpc::jit hands the engine and what `fsdpc dump --memory` plans.
#pragma once

#include <vector>

#include "passes/pipeline.h"
#include "runtime/engine.h"

namespace fsdpc {

struct MicroBatchOptions {
  int grad_accum = 1;
  bool no_sync = false;        // --no-sync: the no_sync and accumulate traces
  bool keep_gathered = false;  // --keep-gathered: the gathered step's traces
};

// One EngineTraces per pipeline stage (one without --pp): `compiled` is
// compile_pipeline(captured, o), whose final traces are each stage's sync;
// the variants the micro-batches need are compiled beside them, and with
// o.diloco the outer step's trace. `pipeline` is left empty. Throws fsdpc::Error for --keep-gathered with --no-sync or
// with no_shard, which has nothing to gather.
std::vector<EngineTraces> step_traces(const Trace& captured, const PipelineOptions& o,
                                      const std::vector<std::vector<Stage>>& compiled, const MicroBatchOptions& m);

// The options of the gathered step's micro-batches: the same model and
// mesh, parameters whole (no_shard on a flat data-parallel mesh), gradients
// not synchronised.
PipelineOptions gathered_micro_options(const PipelineOptions& o);

}  // namespace fsdpc
