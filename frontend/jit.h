// fsdpc::jit: compile a model for sharded training on this rank, as
// torch.compile / thunder.jit users expect — capture, run the pipeline
// (fsdp, grad, split, bucketing, schedule, del), claim the traces for the
// executors, and materialise this rank's parameter shards.
//
//   auto m = fsdpc::make_model("gpt2-tiny");
//   fsdpc::JitOptions o;  o.pipeline.mesh = fsdpc::flat_mesh(world);
//   auto compiled = fsdpc::jit(*m, o);
//   double loss = compiled->train_step(batch).loss;
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "frontend/model.h"
#include "passes/pipeline.h"
#include "runtime/engine.h"

namespace fsdpc {

struct JitOptions {
  // This rank's batch (and sequence length); with engine.grad_accum = K the
  // model is captured for micro-batches of batch / K, and train_step takes
  // the whole batch and splits it.
  CaptureOptions capture;
  // strategy, mesh, wrap, bucketing, prefetch, ...; an empty
  // tensor_parallel_plan is the model's (Model::tensor_parallel_plan()).
  PipelineOptions pipeline;
  // target (resolved: resolve_target(TargetRequest::automatic) in
  // executors/claim.h for `auto`), fusion, optimizer (AdamW betas and eps
  // too), lr schedule, clip, seed, mem cap (mesh: pipeline's)
  EngineOptions engine;
  // A model whose first output is not a scalar (the tutorial mlp) trains on
  // the mean of its squared output when this is set.
  bool mean_square_loss = false;
};

class Compiled {
 public:
  Compiled(std::vector<Stage> stages, std::unique_ptr<Engine> engine);
  // One optimizer step; `batch`: this rank's inputs, in the model's order.
  StepResult train_step(const std::vector<HostTensor>& batch) { return engine_->train_step(batch); }
  std::vector<HostTensor> forward(const std::vector<HostTensor>& batch) { return engine_->forward(batch); }
  std::vector<Engine::Shard> shards() const { return engine_->shards(); }
  // Full parameters gathered on rank 0 (empty elsewhere).
  std::map<std::string, HostTensor> full_state_dict() { return engine_->full_state_dict(); }
  // The traces after every pass, for inspection (as `fsdpc dump` prints them).
  const std::vector<Stage>& stages() const { return stages_; }
  Engine& engine() { return *engine_; }

 private:
  std::vector<Stage> stages_;
  std::unique_ptr<Engine> engine_;
};

std::unique_ptr<Compiled> jit(Model& model, const JitOptions& options);

}  // namespace fsdpc
