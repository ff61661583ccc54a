// What `fsdpc dump` prints, as a library: a captured trace placed on the
// executor's device and compiled as a run would compile it, then the traces
// the requested passes left, their statistics, or the memory plan of one
// training step (runtime/planner/memory_plan.h). A field is documented by the
// `fsdpc dump` flag of the same name (`fsdpc dump --help`), and messages name
// the flag.
//
//   fsdpc::DumpOptions o;
//   o.pipeline.mesh = fsdpc::flat_mesh(2);
//   o.stages = "split,exec";
//   std::string text = fsdpc::dump(fsdpc::capture(model), o);
#pragma once

#include <string>
#include <vector>

#include "executors/claim.h"
#include "ir/target.h"
#include "ir/trace.h"
#include "passes/pipeline.h"
#include "runtime/optimizer.h"
#include "runtime/pipeline_schedule.h"

namespace fsdpc {

struct DumpOptions {
  // The layout: strategy, mesh, tp, pp, wrap, bucketing, precision, remat...
  // Its sync_grads and accumulate_grads are no_sync's and accumulate's.
  PipelineOptions pipeline;
  Target target = Target::cpu;  // resolved (resolve_target() in executors/claim.h asks for auto)
  FusionMode fusion = FusionMode::automatic;  // the exec stage's
  // NAME[,NAME...]: passes (passes/registry.h), forward, backward, exec,
  // fusion (exec fused whatever `fusion` says), or all.
  std::string stages = "del";
  bool no_sync = false;     // a gradient-accumulation micro-batch
  bool accumulate = false;  // which adds the accumulated gradients (acc_*)
  // The gathered step's micro-batches, and the stage gather_once.
  bool keep_gathered = false;
  bool stats = false;   // the statistics of each trace (passes/stats.h)
  std::string format = "text";  // text | json | dot | mlir; stats and memory: text | json

  // memory: the plan of a step of grad_accum micro-batches (the captured
  // trace is one), with no_sync, keep_gathered and the optimizer's state.
  bool memory = false;
  int grad_accum = 1;
  OptimizerOptions::Kind optimizer = OptimizerOptions::Kind::adamw;
  double momentum = 0;
  PipelineSchedule pp_schedule = PipelineSchedule::one_f_one_b;
};

// What `fsdpc dump` writes for `captured`; fsdpc::Error for bad options.
std::string dump(const Trace& captured, const DumpOptions& o);

// The checks that need no trace: the executor, and the flags memory cannot
// take. dump() makes them first; a caller that captures a micro-batch for
// memory calls this before capturing, so that a refused option is reported
// as such and not as whatever the capture finds. (The others wait for the
// trace: a bad stage name is reported after compiling.)
void check_dump_options(const DumpOptions& o);

// The passes' stages for dump(): compile_pipeline()'s, pipeline stages side
// by side (stage 0's traces of a pass, then stage 1's, ...); the captured
// trace first as `trace` with --pp; with keep_gathered the micro-batches'
// passes and then gather_once; then exec and fusion as `stages` asks.
std::vector<Stage> dump_stages(const Trace& placed, const DumpOptions& o);
// The traces `spec` (DumpOptions::stages) names, in the order it names
// them; fsdpc::Error naming the stages there are for an unknown name.
std::vector<const Trace*> select_traces(const std::vector<Stage>& stages, const std::string& spec);

}  // namespace fsdpc
