// The training engine: what one rank runs each step. It claims the final
// forward and backward traces, materialises only this rank's shard of every
// parameter, and per step runs forward and backward through the interpreter,
// clips the gradient norm across shards, updates the local shards and
// all-reduces the logged loss. It is the runtime half of fsdpc::jit.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/mesh.h"
#include "ir/trace.h"
#include "executors/claim.h"
#include "executors/rank_device.h"
#include "passes/outer_step.h"
#include "passes/tensor_parallel_plan.h"
#include "runtime/allocator.h"
#include "runtime/init.h"
#include "runtime/interpreter.h"
#include "runtime/lr_schedule.h"
#include "runtime/optimizer.h"
#include "runtime/pipeline_schedule.h"

namespace fsdpc {

class MpiContext;
class Profiler;
class RankFiles;

// A host array crossing the API: float32 or int64 data of a shape.
struct HostTensor {
  Shape shape;
  DType dtype = DType::f32;
  std::vector<float> f32;
  std::vector<int64_t> i64;
  static HostTensor floats(Shape shape, std::vector<float> data);
  static HostTensor ints(Shape shape, std::vector<int64_t> data);
};

// Rows [k*b, (k+1)*b) of every input, b = rows / count: the k-th of `count`
// micro-batches. fsdpc::Error when the rows do not split evenly.
std::vector<HostTensor> micro_batch(const std::vector<HostTensor>& inputs, int k, int count);

// What the engine needs of each parameter beyond the traces.
struct ParamPlan {
  std::string path;  // "h.0.attn.c_attn.weight"; the proxy is param_proxy_name(path)
  Shape full_shape;  // unsharded
  ParamInit init;
};

struct EngineTraces;

struct EngineOptions {
  Mesh mesh;
  // Gradient accumulation: train_step splits this rank's batch into
  // grad_accum micro-batches. With no_sync (PyTorch's), the first
  // grad_accum-1 keep unsharded local gradients and only the last
  // synchronises; without it every micro-batch reduces its gradients.
  int grad_accum = 1;
  bool no_sync = false;
  // Parameters gathered once per step (PyTorch FSDP's
  // set_reshard_after_backward(False) with no_sync; the "zero2-style"
  // keeping across micro-batches the FSDP material recommends for pipeline
  // stages): EngineTraces::gathered's gather runs before the first
  // micro-batch, every micro-batch runs on the full parameters without
  // synchronising, and its reduce runs once after the last.
  bool keep_gathered = false;
  // What the traces are claimed for and run on, already resolved: jit()
  // takes it as it is; `--executor auto` is resolved where it enters
  // (resolve_target in executors/claim.h; TrainOptions::executor).
  Target target = Target::cpu;
  // automatic (the default, as Thunder fuses by default): regions of fusible
  // statements compiled by the target's fusion executor (passes/fuse.h);
  // none: every statement its own kernel.
  FusionMode fusion = FusionMode::automatic;
  OptimizerOptions optimizer;  // optimizer.lr is the schedule's base rate
  // The rate of each step: scheduled_lr(lr_schedule, optimizer.lr, step),
  // step the optimizer's count (restored by load_rank_state).
  LrSchedule lr_schedule;
  // Pipeline parallelism (mesh.pp > 1): this rank's stage runs its traces
  // over grad_accum micro-batches in this order (runtime/pipeline_schedule.h);
  // pp_tied_params are the parameters (paths) both the first and the last
  // stage hold, a tied embedding, whose gradients are summed between them.
  PipelineSchedule pp_schedule = PipelineSchedule::one_f_one_b;
  std::vector<std::string> pp_tied_params;
  double clip = 0;  // max gradient norm; 0: no clipping
  uint64_t seed = 0;
  std::optional<int64_t> mem_cap;  // bytes per rank
  // The model family's tp plan, the one the traces were compiled with
  // (PipelineOptions::tensor_parallel_plan): init cuts each split
  // parameter's part by it, and a checkpoint's parts are checked against it
  // at the tp they were written at. It travels as data because the runtime
  // sees no model (runtime/ is below frontend/).
  TensorParallelPlan tensor_parallel_plan;
  // Called first by the constructor, before any communication, with the
  // traces about to be claimed: fsdpc train checks there that every rank is
  // about to run the same ones (runtime/reliability/consistency.h).
  std::function<void(const EngineTraces&)> before_collectives;
};

struct StepResult {
  double loss = 0;       // mean over the global batch (all-reduced)
  double grad_norm = 0;  // global, before clipping (0 when clipping is off)
  double lr = 0;         // the learning rate this step's update used
  bool outer = false;    // DiLoCo: an outer trace ran after the update (OuterStep::runs_after)
  double seconds = 0;
  // Device time of the step's collectives by kind, where the executor
  // measures it (--executor cuda with FSDPC_NCCL_TIMING=1).
  std::vector<CollectiveTime> collectives;
};

// A forward and its backward: the pipeline's final traces (unclaimed).
struct StepTraces {
  Trace forward, backward;
};

// A step that gathers its parameters once (EngineOptions::keep_gathered):
// gather (shards -> full parameters) and reduce (summed full gradients ->
// reduced shards) from passes/gather_once.h, and the micro-batches' traces
// on full parameters without synchronisation (no_shard, no_sync; with --pp,
// this rank's stage's).
struct GatheredStep {
  Trace gather, reduce;
  StepTraces micro;
};

// DiLoCo (PipelineOptions::diloco): the outer step's traces, per fragment
// (passes/outer_step.h). Fragment f's runs after the optimizer steps k > 0
// with k % every == its offset; with a delay its exchange lands `delay`
// steps later. One fragment of offset 0 without a delay is DiLoCo's outer
// step, after every `every`-th step.
struct OuterStep {
  std::vector<OuterFragment> fragments;
  int every = 0;
  int delay = 0;
  // Whether the step that brings the optimizer's count to k runs an outer
  // trace: a fragment's exchange issued, landed, or both at once.
  bool runs_after(int64_t k) const;
};

// `o` with every trace lowered by execution_trace(target, fusion).
OuterStep lower_outer_step(const OuterStep& o, Target target, FusionMode fusion);

// The traces of each kind of micro-batch (passes/grad.h GradOptions).
struct EngineTraces {
  StepTraces sync;                       // gradients synchronised (with --pp: this rank's stage)
  std::optional<StepTraces> no_sync;     // unsharded local gradients (no_sync micro-batches)
  std::optional<StepTraces> accumulate;  // adds acc_* before synchronising (the last one)
  // With --pp, every stage's, in stage order: the launch check compares
  // them all, since each rank runs only its own.
  std::vector<StepTraces> pipeline = {};
  std::optional<GatheredStep> gathered = {};  // keep_gathered
  std::optional<OuterStep> outer = {};        // DiLoCo
};

class Engine {
 public:
  // Collective over the mesh's ranks (builds communicators). no_sync with
  // grad_accum > 1 needs the no_sync and accumulate traces.
  Engine(const EngineTraces& traces, std::vector<ParamPlan> params, const EngineOptions& options);
  Engine(const Trace& forward, const Trace& backward, std::vector<ParamPlan> params, const EngineOptions& options)
      : Engine(EngineTraces{{forward, backward}, {}, {}}, std::move(params), options) {}
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // One optimizer step. `inputs`: this rank's slice of the global batch, in
  // the order of the forward's non-parameter arguments.
  StepResult train_step(const std::vector<HostTensor>& inputs);
  // The forward alone; returns the model's outputs (not the saved values).
  // A pipeline stage runs its own forward: every stage must call it, and a
  // stage before the last returns the activation it sent.
  std::vector<HostTensor> forward(const std::vector<HostTensor>& inputs);

  // A host copy of an f32 tensor of this engine (a shard's value lives on
  // the executor's device: GPU memory under --executor cuda).
  std::vector<float> to_host(const TensorValue& v);
  // This rank's shard of each parameter, in argument order.
  struct Shard {
    std::string path;
    const TensorValue* value;
    int64_t row_begin;  // first row of the full parameter it holds
  };
  std::vector<Shard> shards() const;
  // Every full parameter gathered to rank 0 (other ranks get an empty map).
  std::map<std::string, HostTensor> full_state_dict();
  // Overwrites every parameter shard: `fill(path, full_shape, row_begin,
  // rows, out)` writes rows [row_begin, row_begin + rows) of the full
  // parameter (rows past full_shape[0] are padding and must be 0).
  using ShardFill = std::function<void(const std::string& path, const Shape& full_shape, int64_t row_begin,
                                       int64_t rows, float* out)>;
  void load_parameters(const ShardFill& fill);
  // The mean of a per-rank value over the data-parallel ranks (the loss,
  // which a tp group's ranks share); with pipeline stages, of the last
  // stage's values, which every rank gets.
  double mean_over_ranks(double local);

  // Resumable training state, per rank: this rank's parameter shards and
  // optimizer state to <dir>/rank-<r>.safetensors (step counts, and where
  // each shard sits in its tp part and full parameter, in its metadata).
  // Collective. The caller makes the folder complete atomically.
  void save_rank_state(const std::string& dir, int64_t step);
  // Restores what save_rank_state wrote — at any world size, strategy and
  // tp size: each rank reads its rows from whichever rank files hold them
  // (runtime/io/checkpoint_parts.h). Returns the step to continue from. Throws
  // fsdpc::Error naming the file and tensor when the files do not match
  // this model (names, row sizes, tp metadata, missing rows).
  int64_t load_rank_state(const std::string& dir);
  void barrier();

  const Trace& forward_trace() const { return sync_.forward; }
  const Trace& backward_trace() const { return sync_.backward; }
  const MemStats& memory() const { return allocator_.stats(); }
  void reset_peak_memory() { allocator_.reset_peaks(); }
  int64_t reserved_memory() const { return allocator_.reserved_bytes(); }  // held by the caching allocator
  int rank() const;
  const Interpreter& interpreter() const { return *interpreter_; }
  Interpreter& interpreter() { return *interpreter_; }
  int world() const { return options_.mesh.world(); }
  // Records the steps that follow on `profiler` (not owned: kernels, the
  // MPI executor's collectives, the step's phases, live memory) until reset
  // to null. Null, the default, costs one branch per hook.
  void set_profiler(Profiler* profiler);

 private:
  struct Param {
    ParamPlan plan;
    size_t arg;  // index in the forward's arguments
    TensorValue value;
    int64_t row_begin = 0;
    std::string group;  // the group whose shards make up the parameter; "" when replicated
    bool requires_grad = true;
    // Set when tensor parallelism holds a part of it on each tp rank: how the
    // part is cut (the plan's split at mesh.tp).
    std::optional<TensorParallelSplit> tp_split;
  };
  // The forward's inputs copied in, its parameters by reference, and (when
  // it takes one) the loss's cotangent.
  std::vector<TensorValue> forward_args(const Trace& forward, const std::vector<HostTensor>& inputs,
                                        double cotangent = 1.0);
  TensorValue cotangent_value(const TensorType& type, double cotangent);
  double all_reduce_sum(double v, const std::string& group, const char* label);
  // Tensor parallelism: this rank's part of a whole parameter, and the parts
  // of a tp group put back together (on its first rank).
  std::vector<float> cut_tp_part(const Param& p, const std::vector<float>& whole) const;
  std::vector<float> gather_tp_parts(const Param& p, std::vector<float> part);
  // This rank's rows of `p` out of `tensor` (its tp part, or the full
  // parameter when tp left it whole) into `host`, 0 past the end.
  void take_rows(const Param& p, const std::vector<float>& tensor, std::vector<float>& host) const;
  // Runs one micro-batch; returns its local loss and its gradients.
  double micro_step(const StepTraces& t, const std::vector<HostTensor>& inputs, double cotangent,
                    const std::vector<TensorValue>& acc, std::vector<TensorValue>& grads);
  void add_into(std::vector<TensorValue>& sum, std::vector<TensorValue>& grads);
  // A backward's arguments: the forward's saved values, then its acc_* and
  // cotangent arguments by name (acc[g]: the g-th parameter with a gradient).
  std::vector<TensorValue> backward_args(const Trace& backward, std::vector<TensorValue> saved,
                                         const std::vector<TensorValue>& acc, double cotangent);
  // Pipeline parallelism (runtime/engine_pipeline.cpp): this stage's
  // forwards and backwards of every micro-batch in the schedule's order,
  // their gradients summed into `sum`; returns the sum of the micro-batches'
  // losses on the last stage, 0 elsewhere. Then the tied parameters'
  // gradients summed between the first and last stage.
  double pipeline_micro_batches(const std::vector<HostTensor>& inputs, std::vector<TensorValue>& sum);
  void sum_tied_gradients(std::vector<TensorValue>& sum);
  // keep_gathered (runtime/engine_gathered.cpp): matches the gather and
  // reduce traces' arguments to params_ once, at construction; fills
  // gathered_values_; reduces the step's summed full gradients to this
  // rank's shards.
  void bind_gathered_step();
  void gather_parameters();
  std::vector<TensorValue> reduce_gradients(std::vector<TensorValue> local);
  // DiLoCo (runtime/engine_outer.cpp): matches the outer traces' arguments
  // to params_ once; starts a round (anchor <- theta, momentum 0); after the
  // update that brings the optimizer's count to k, lands the exchanges due
  // and issues (or, without a delay, runs) the fragments whose turn it is;
  // lands every exchange in flight now (a checkpoint); the exchanges in
  // flight after step k (a resume).
  void bind_outer_step();
  // Checkpoints (runtime/engine_state.cpp): one tensor of a parameter's (its
  // rows, or its part) into device memory; DiLoCo's choice of rank files.
  void read_state(const RankFiles& rf, const Param& p, const std::string& name, float* device_out);
  bool select_outer_replica(RankFiles& rf, const std::string& dir);
  void start_outer_round();
  bool outer_after_update(int64_t k);
  void land_in_flight();
  std::vector<std::pair<size_t, int64_t>> in_flight_after(int64_t k) const;  // (fragment, lands_at)
  struct OuterExchange;
  void land(OuterExchange& x);
  // Runs a fragment's step or update trace: `landed` first, then its
  // parameters, anchors and momenta; the new anchors and momenta kept, the
  // parameters set to the new anchor (or its mix).
  void outer_update(size_t fragment, const Trace& t, std::vector<TensorValue> landed);
  std::vector<TensorValue> outer_args(const Trace& t, std::vector<TensorValue> first, bool take_state);
  int pipeline_stage() const;
  bool is_tied(const Param& p) const;
  // full_state_dict's last part with pipeline stages: each stage's first
  // rank sends what it gathered to world rank 0, which adds it to `state`.
  void send_stage_state(std::map<std::string, HostTensor>& state);
  // Parameters, gradients and optimizer state live on the executor's device:
  // every host access goes through its backend.
  DeviceBackend& backend();
  void to_device(const TensorValue& v, const std::vector<float>& host);

  EngineOptions options_;
  std::unique_ptr<MpiContext> mpi_;      // host-side reductions, and the CPU's collectives
  std::unique_ptr<RankDevice> device_;   // the executor's kernel context and backend
  Allocator allocator_;                  // after device_: returns its blocks first
  StepTraces sync_;
  Trace eval_forward_;  // forward(): sync_'s forward without the head's gradients
  std::optional<StepTraces> no_sync_, accumulate_;
  std::optional<GatheredStep> gathered_;
  // keep_gathered: the full parameters by path, from the step's gather until
  // its reduce; forward_args reads them instead of the shards.
  std::unordered_map<std::string, TensorValue> gathered_values_;
  std::vector<size_t> gather_params_;  // params_ index of each gather trace argument
  std::optional<OuterStep> outer_;
  // DiLoCo's state, by outer slot (every fragment's parameters, fragment by
  // fragment): params_ index, the anchor and the outer momentum (empty until
  // a round starts, and without momentum).
  std::vector<size_t> outer_params_;
  std::unordered_map<std::string, size_t> outer_slot_;   // outer traces' parameter proxy -> slot
  std::vector<std::vector<size_t>> fragment_slots_;      // per fragment, in its traces' argument order
  bool outer_momentum_ = false;
  std::vector<TensorValue> anchors_, outer_momenta_;
  // An exchange in flight: issue's futures and wires until it lands, then
  // land's means (by landed_params) until the update.
  struct OuterExchange {
    size_t fragment = 0;
    int64_t lands_at = 0;  // the optimizer's count after whose update it lands
    bool landed = false;
    std::vector<TensorValue> held;
  };
  std::vector<OuterExchange> in_flight_;
  std::vector<Param> params_;
  std::map<std::string, Shape> full_shapes_;  // every parameter of the model (other stages' too)
  std::unique_ptr<Interpreter> interpreter_;
  std::unique_ptr<Optimizer> optimizer_;
  Profiler* profiler_ = nullptr;
};

}  // namespace fsdpc
