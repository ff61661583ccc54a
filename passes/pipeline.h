// The default compilation pipeline, from a captured trace to the forward and
// backward traces every rank runs; each stage is kept for inspection
// (`fsdpc dump --stage NAME`).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "ir/mesh.h"
#include "ir/trace.h"
#include "passes/fuse_head.h"
#include "passes/outer_step.h"
#include "passes/pipeline_p2p.h"
#include "passes/remat.h"
#include "passes/split.h"
#include "passes/strategy.h"
#include "passes/tensor_parallel_plan.h"
#include "passes/wrap.h"

namespace fsdpc {

struct PipelineOptions {
  Strategy strategy = Strategy::zero3;
  Mesh mesh;                   // flat for zero3/zero2/no_shard; R x S for hybrid*
  std::string wrap = "block";  // FSDP units: block | size:N | none
  bool bucketing = false;      // --bucketing unit
  int prefetch = 1;            // all_gathers issued this many units ahead
  int max_inflight = 2;        // at most this many all_gathers outstanding
  double bucket_mb = 25.0;     // DDP gradient bucket size
  // f32, or bf16/f16: mixed precision (passes/autocast.h), run after fsdp;
  // then the gradients are reduced in reduce_dtype (f32, or `precision`).
  DType precision = DType::f32;
  DType reduce_dtype = DType::f32;
  // --gather-dtype int8: the parameters' all_gathers move int8 codes with
  // f32 scales (passes/quantize_gathers.h, after bucketing).
  bool int8_gathers = false;
  bool sync_grads = true;      // false: no_sync (gradient accumulation micro-batch)
  bool accumulate_grads = false;
  RematOptions remat;          // activation checkpointing (passes/remat.h)
  // --loss-chunk: the language-model head fused with its loss
  // (passes/fuse_head.h), on by default; off keeps linear then cross_entropy.
  LossChunk loss_chunk;
  // --outer-steps: DiLoCo on a hybrid mesh; the replicas' gradients are not
  // all-reduced each step, an outer trace (passes/outer_step.h) syncs them.
  DilocoOptions diloco;
  bool sequence_parallel = false;  // --sequence-parallel (with --tp T > 1; passes/tensor_parallel.h)
  // Which parameters tp cuts (mesh.tp > 1): the model family's plan, which
  // the frontend hands down (Model::tensor_parallel_plan()).
  TensorParallelPlan tensor_parallel_plan;
  // Pipeline parallelism (compile_pipeline): stages, and blocks per stage
  // (empty: balanced by parameters). `mesh` is then one stage's.
  int pp = 1;
  std::vector<int> pp_balance;
  // Set by compile_pipeline for each stage: grad also returns the boundary
  // input's gradient, and the send/recv between stages follow split.
  std::optional<PipelineStagePeers> pipeline_stage;
  // Collectives over one rank stay (elide drops only the divisions by 1):
  // a world of one then runs every collective a larger world would, which
  // exercises their paths with one device. fsdpc train and dump set it from
  // FSDPC_KEEP_COLLECTIVES=1 (tools/gpu_check.sh).
  bool keep_collectives = false;
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

// compile() in its parts, for a caller that compiles several option sets
// sharing a prefix of the passes: the planner's candidates of one strategy
// and mesh differ only in remat, bucketing and prefetch, so they share the
// joint trace, a remat mode's split, a bucketing. compile() is exactly
// compile_joint, compile_split (which ends with compile_cleanup),
// compile_bucketing and compile_schedule, in that order; there is no other
// copy of the pass order. Each part verifies its passes' results when
// options.verify is set, and keeps them in `log` when it is not null.
class StageLog {
 public:
  void keep(std::string name, std::vector<Trace> traces);
  // The pass after a keep is timed from here: not the copy, not verifying.
  void restart_clock() { started_ = Clock::now(); }
  std::vector<Stage> take() { return std::move(stages_); }

 private:
  using Clock = std::chrono::steady_clock;
  std::vector<Stage> stages_;
  Clock::time_point started_ = Clock::now();
};
// tp, fsdp, autocast and grad, and elide when it removes something: the
// joint trace, with the FSDP units and the parameters that get gradients.
struct JointTrace {
  Trace trace;
  std::vector<Unit> units;
  std::vector<std::string> grad_params;
};
JointTrace compile_joint(const Trace& captured, const PipelineOptions& options, StageLog* log);
// The remat plan, split (and p2p for a pipeline stage), then compile_cleanup.
SplitResult compile_split(const JointTrace& joint, const PipelineOptions& options, StageLog* log);
// dce and cse of the forward and backward.
SplitResult compile_cleanup(SplitResult split, const PipelineOptions& options, StageLog* log);
// bucketing, with the backward's saved types following the forward's.
SplitResult compile_bucketing(const SplitResult& split, const JointTrace& joint, const PipelineOptions& options,
                              StageLog* log);
// schedule, then del unless `place_dels` is off (a lowering that fuses places
// them again itself).
SplitResult compile_schedule(const SplitResult& split, const JointTrace& joint, const PipelineOptions& options,
                             StageLog* log, bool place_dels = true);

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
