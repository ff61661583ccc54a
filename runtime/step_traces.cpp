// The traces of each kind of micro-batch (runtime/step_traces.h).
#include "runtime/step_traces.h"

#include "ir/error.h"
#include "passes/gather_once.h"
#include "passes/outer_step.h"

namespace fsdpc {

namespace {

StepTraces final_traces(const std::vector<Stage>& stages) {
  return StepTraces{stages.back().traces.at(0), stages.back().traces.at(1)};
}

const Trace& fsdp_trace(const std::vector<Stage>& stages) {
  for (const Stage& s : stages)
    if (s.name == "fsdp") return s.traces.at(0);
  FSDPC_CHECK(false) << "the compiled stages have no fsdp pass";
  return stages.front().traces.at(0);
}

}  // namespace

PipelineOptions gathered_micro_options(const PipelineOptions& o) {
  PipelineOptions m = o;
  m.strategy = Strategy::no_shard;
  m.mesh.shards = o.mesh.replicas * o.mesh.shards;
  m.mesh.replicas = 1;
  m.bucketing = false;  // nothing is gathered or reduced in them to bucket
  m.int8_gathers = false;  // nor quantized: the step's gather trace is (gather_once_traces)
  m.sync_grads = false;
  m.accumulate_grads = false;
  return m;
}

std::vector<EngineTraces> step_traces(const Trace& captured, const PipelineOptions& o,
                                      const std::vector<std::vector<Stage>>& compiled, const MicroBatchOptions& m) {
  if (m.keep_gathered && m.no_sync)
    fail("--keep-gathered reduces the gradients once per step already; drop --no-sync");
  if (m.keep_gathered && o.strategy == Strategy::no_shard)
    fail("--keep-gathered needs a sharded strategy (zero3, zero2, hybrid or hybrid_zero2): no_shard's parameters "
         "are whole already; --no-sync reduces its gradients once per step");
  std::vector<EngineTraces> out;
  for (const std::vector<Stage>& stages : compiled) out.push_back({final_traces(stages), {}, {}});
  if (m.no_sync && m.grad_accum > 1) {
    // PyTorch's no_sync: unsharded local gradients for K-1 micro-batches,
    // added to the last one's before it synchronises.
    PipelineOptions local = o, last = o;
    local.sync_grads = false;
    last.accumulate_grads = true;
    const std::vector<std::vector<Stage>> no_sync = compile_pipeline(captured, local),
                                          accumulate = compile_pipeline(captured, last);
    for (size_t s = 0; s < out.size(); ++s) {
      out[s].no_sync = final_traces(no_sync.at(s));
      out[s].accumulate = final_traces(accumulate.at(s));
    }
  }
  if (m.keep_gathered) {
    const std::vector<std::vector<Stage>> micro = compile_pipeline(captured, gathered_micro_options(o));
    for (size_t s = 0; s < out.size(); ++s) {
      GatherOnceTraces step = gather_once_traces(fsdp_trace(compiled[s]), o.int8_gathers);
      out[s].gathered = GatheredStep{std::move(step.gather), std::move(step.reduce), final_traces(micro.at(s))};
    }
  }
  if (o.diloco.enabled())
    for (size_t s = 0; s < out.size(); ++s)
      out[s].outer = OuterStep{outer_fragments(fsdp_trace(compiled[s]), o.diloco, o.mesh, o.wrap),
                               o.diloco.outer_steps, o.diloco.outer_delay};
  return out;
}

}  // namespace fsdpc
