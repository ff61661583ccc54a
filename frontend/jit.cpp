// jit(): capture, compile, and hand the final traces to the runtime engine.
#include "frontend/jit.h"

#include "executors/claim.h"
#include "executors/comm/mpi_world.h"
#include "runtime/step_traces.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "passes/place.h"

namespace fsdpc {

namespace {

ParamInit to_param_init(const Init& init) {
  switch (init.kind) {
    case Init::Kind::normal: return {ParamInit::Kind::normal, init.scale};
    case Init::Kind::uniform: return {ParamInit::Kind::uniform, init.scale};
    case Init::Kind::zeros: return {ParamInit::Kind::zeros, 0.0};
    case Init::Kind::ones: return {ParamInit::Kind::ones, 0.0};
  }
  FSDPC_CHECK(false) << "unknown init kind";
  return {};
}

// Appends loss = mean(out * out) and returns it first.
Trace with_mean_square_loss(Trace t) {
  FSDPC_CHECK(!t.returns.is_tuple) << "mean_square_loss expects one output";
  TraceBuilder b(t);
  const std::string out = t.returns.name;
  const TensorType& type = b.type_of(out);
  Proxy sq = b.emit1(OpId::Mul, {Operand::of(out), Operand::of(out)});
  IntList dims;
  for (size_t d = 0; d < type.shape.size(); ++d) dims.push_back(static_cast<int64_t>(d));
  Proxy sum = b.emit1(OpId::Sum, {Operand::of(sq.name)}, Attrs{{"dims", dims}});
  Proxy loss = b.emit1(OpId::Div, {Operand::of(sum.name), Operand::lit(static_cast<double>(numel(type.shape)))});
  t.returns = ReturnTree::leaf(loss.name);
  return t;
}

}  // namespace

Compiled::Compiled(std::vector<Stage> stages, std::unique_ptr<Engine> engine)
    : stages_(std::move(stages)), engine_(std::move(engine)) {}

std::unique_ptr<Compiled> jit(Model& model, const JitOptions& options) {
  const int k = options.engine.grad_accum;
  if (k < 1) fail("grad_accum must be at least 1, got ", k);
  CaptureOptions co = options.capture;
  if (k > 1) {
    const int64_t batch = co.batch.value_or(model.inputs(co).at(0).shape.at(0));
    if (batch % k != 0) fail("the per-rank batch ", batch, " does not split into ", k, " equal micro-batches");
    co.batch = batch / k;
  }
  // The target was resolved where it was asked for (`auto` included); every
  // tensor lives on its device from the first stage on.
  EngineOptions engine = options.engine;
  executors_for(engine.target);  // an unavailable one (cuda without CUDA) fails before compiling
  if (options.pipeline.precision == DType::f16 && engine.target == Target::cpu)
    fail("precision f16 needs --executor cuda: the CPU kernels hold f32 and bf16 (--precision bf16)");
  // The model family's tp plan, unless the caller gave one; the engine
  // cuts and checks parameters by the same plan the passes split by.
  PipelineOptions pipeline = options.pipeline;
  if (pipeline.tensor_parallel_plan.empty()) pipeline.tensor_parallel_plan = model.tensor_parallel_plan();
  engine.tensor_parallel_plan = pipeline.tensor_parallel_plan;
  Trace captured = capture(model, co);
  if (options.mean_square_loss) captured = with_mean_square_loss(std::move(captured));
  captured = place(captured, target_device(engine.target));
  // Pipeline parallelism: every rank compiles every stage (the launch check
  // compares them all) and runs its own, the world's rank / (a stage's ranks).
  const int pp = pipeline.pp;
  int stage = 0;
  std::vector<std::vector<Stage>> per_stage = compile_pipeline(captured, pipeline);
  std::vector<EngineTraces> stage_traces = step_traces(
      captured, pipeline, per_stage, MicroBatchOptions{k, options.engine.no_sync, options.engine.keep_gathered});
  if (pp > 1) {
    if (engine.target == Target::cuda && engine.pp_schedule == PipelineSchedule::one_f_one_b)
      fail("--pp-schedule 1f1b on the cuda executor: an NCCL send holds the comm stream until its peer receives, "
           "so neighbouring stages that both send before receiving (1F1B does) would deadlock; use --pp-schedule "
           "gpipe");
    mpi_init();
    const int stage_world = pipeline.mesh.world();
    if (mpi_world_size() != pp * stage_world)
      fail("--pp ", pp, " stages of ", stage_world, " ranks need ", pp * stage_world, " processes; mpirun started ",
           mpi_world_size());
    stage = mpi_world_rank() / stage_world;
  }
  EngineTraces traces = stage_traces.at(stage);
  if (pp > 1) {
    for (const EngineTraces& t : stage_traces) traces.pipeline.push_back(t.sync);
    // A tied parameter: read by the first and the last stage.
    for (const Proxy& a : traces.pipeline.front().forward.args)
      for (const Proxy& b : traces.pipeline.back().forward.args)
        if (a.is_param() && a.param_path == b.param_path) engine.pp_tied_params.push_back(a.param_path);
  }
  std::vector<Stage> stages = std::move(per_stage.at(stage));

  std::vector<ParamPlan> plans;
  for (const NamedParam& p : model.named_parameters())
    plans.push_back({p.path, p.spec->shape, to_param_init(p.spec->init)});
  engine.mesh = pipeline.mesh;
  engine.mesh.pp = pp;
  auto e = std::make_unique<Engine>(traces, std::move(plans), engine);
  return std::make_unique<Compiled>(std::move(stages), std::move(e));
}

}  // namespace fsdpc
