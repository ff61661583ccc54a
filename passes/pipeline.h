// The default compilation pipeline, from a captured trace to the forward and
// backward traces every rank runs; each stage is kept for inspection
// (`fsdpc dump --stage NAME`).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/mesh.h"
#include "ir/trace.h"
#include "passes/pipeline_p2p.h"
#include "passes/remat.h"
#include "passes/strategy.h"

namespace fsdpc {

struct PipelineOptions {
  Strategy strategy = Strategy::zero3;
  Mesh mesh;                   // flat for zero3/zero2/no_shard; R x S for hybrid*
  std::string wrap = "block";  // FSDP units: block | size:N | none
  bool bucketing = false;      // --bucketing unit
  int prefetch = 1;            // all_gathers issued this many units ahead
  int max_inflight = 2;        // at most this many all_gathers outstanding
  double bucket_mb = 25.0;     // DDP gradient bucket size
  // f32, or bf16/f16: mixed precision (passes/autocast.h), run after fsdp.
  DType precision = DType::f32;
  bool sync_grads = true;      // false: no_sync (gradient accumulation micro-batch)
  bool accumulate_grads = false;
  RematOptions remat;          // activation checkpointing (passes/remat.h)
  bool sequence_parallel = false;  // --sequence-parallel (with --tp T > 1; passes/tensor_parallel.h)
  // Pipeline parallelism (compile_pipeline): stages, and blocks per stage
  // (empty: balanced by parameters). `mesh` is then one stage's.
  int pp = 1;
  std::vector<int> pp_balance;
  // Set by compile_pipeline for each stage: grad also returns the boundary
  // input's gradient, and the send/recv between stages follow split.
  std::optional<PipelineStagePeers> pipeline_stage;
  // Run the verifier after every pass (tests, `fsdpc dump`); the pipeline
  // benchmark measures the passes alone.
  bool verify = true;
};

struct Stage {
  std::string name;           // a pass name (passes/registry.h)
  std::vector<Trace> traces;  // one, or forward and backward after split
  double pass_ms = 0;         // wall time of the pass (not of verifying it)
};

// Runs every pass, verifying after each; throws fsdpc::Error on bad options.
std::vector<Stage> compile(const Trace& captured, const PipelineOptions& options);

// Pipeline parallelism: the captured trace cut into options.pp stages
// (passes/pipeline_split.h), each compiled by compile() for one stage's
// mesh; element s is stage s's passes, the first named `pp` (its cut of the
// captured trace), its traces named stage<s>. With pp = 1, {compile()}.
std::vector<std::vector<Stage>> compile_pipeline(const Trace& captured, const PipelineOptions& options);

// The backward receives saved_for_backward positionally; after passes
// rewrite the forward (bucketing builds gathered parameters from a flat
// buffer), its argument types follow what the forward now returns. compile()
// calls it after bucketing; so must anything that runs the passes itself.
void sync_saved_types(const Trace& fwd, Trace& bwd);

}  // namespace fsdpc
