// The fsdpc sub-commands. Each adds itself to the CLI11 app and returns what
// runs when it was given; user errors throw fsdpc::Error (exit code 2).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>

#include "ir/trace.h"
#include "passes/pipeline.h"

namespace fsdpc {
struct EngineOptions;
}

namespace fsdpc::cli {

struct Command {
  CLI::App* app;
  std::function<void()> run;
  // Checks that CLI11 cannot express (one of --model/--config/...).
  std::function<void()> validate = [] {};
};

Command add_trace_command(CLI::App& app);
Command add_print_command(CLI::App& app);
Command add_dump_command(CLI::App& app);
Command add_advise_command(CLI::App& app);
Command add_train_command(CLI::App& app);
Command add_generate_command(CLI::App& app);
Command add_flight_command(CLI::App& app);
Command add_models_command(CLI::App& app);
Command add_passes_command(CLI::App& app);
Command add_link_probe_command(CLI::App& app);
Command add_matmul_probe_command(CLI::App& app);
Command add_tokenize_command(CLI::App& app);

// Where a command's trace comes from: a built-in model, a config.json, or
// (dump only) a trace file.
struct ModelSource {
  std::string model, config, trace_file;
  int64_t batch = 0, seq = 0;
};
void add_model_options(CLI::App* cmd, ModelSource& src, bool allow_trace_file);

// DiLoCo's flags (train, dump, advise): --outer-steps, --outer-lr,
// --outer-momentum, --outer-dtype, and Streaming DiLoCo's --outer-fragments,
// --outer-delay, --outer-mix.
struct DilocoArgs {
  DilocoOptions numbers;
  std::string dtype = "f32";
  DilocoOptions options() const;
};
void add_diloco_options(CLI::App* cmd, DilocoArgs& d);

// How a model is sharded: the flags dump and train share.
struct ShardingArgs {
  std::string strategy = "zero3", mesh, wrap = "block", bucketing = "none", precision = "f32", reduce_dtype = "f32",
              gather_dtype = "param", remat = "none", loss_chunk = "auto";
  int prefetch = 1, max_inflight = 2;
  int tp = 1;  // --tp: tensor-parallel ranks per group
  bool sequence_parallel = false;  // --sequence-parallel
  double bucket_mb = 25.0;
  int pp = 1;                         // --pp: pipeline stages, the world is pp x (one stage's ranks)
  std::string pp_balance;             // --pp-balance: blocks per stage, "3,3,2"
  std::string pp_schedule = "1f1b";   // --pp-schedule: gpipe | 1f1b (train)
  DilocoArgs diloco;
};
void add_sharding_options(CLI::App* cmd, ShardingArgs& s);

// The optimizer and LR schedule flags (train): numbers bind to the engine's
// options, the two names stay text until apply_optimizer_names().
struct OptimizerArgs {
  std::string optimizer = "adamw", lr_schedule = "constant";
};
void add_optimizer_options(CLI::App* cmd, EngineOptions& engine, OptimizerArgs& names);
void apply_optimizer_names(const OptimizerArgs& names, EngineOptions& engine);
// The pipeline options for `world` ranks. With `world_source` set (what
// fixed the world, for messages: "--world-size is 3", "mpirun started 2"), a
// hybrid mesh must have that many ranks; without it the mesh sets the world.
// With --pp P, `mesh` is one stage's, of world / P ranks.
void check_model_source(const ModelSource& src, bool allow_trace_file);
Trace load_source_trace(const ModelSource& src);
// The tp plan of the source's model family (passes/tensor_parallel_plan.h).
TensorParallelPlan source_tensor_parallel_plan(const ModelSource& src);
PipelineOptions sharding_pipeline(const ShardingArgs& s, int world, const std::string& world_source);
// One pipeline stage's part of sharding_pipeline, on `world` ranks.
PipelineOptions stage_pipeline(const ShardingArgs& s, int world, const std::string& world_source);

}  // namespace fsdpc::cli
