// One rank's training step: forward, backward, clip, update, loss.
#include "runtime/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <unordered_map>

#include "executors/claim.h"
#include "executors/comm/mpi_check.h"
#include "executors/comm/mpi_executor.h"
#include "executors/cpu/cpu_executor.h"
#include "executors/fusion/fusion_kernel.h"
#include "ir/error.h"
#include "passes/grad.h"
#include "passes/head_grad_forward.h"
#include "passes/tensor_parallel_plan.h"
#include "runtime/clip.h"
#include "runtime/profiler.h"

namespace fsdpc {

HostTensor HostTensor::floats(Shape shape, std::vector<float> data) {
  FSDPC_CHECK(static_cast<int64_t>(data.size()) == numel(shape)) << "data does not fill " << shape_str(shape);
  HostTensor t;
  t.shape = std::move(shape);
  t.f32 = std::move(data);
  return t;
}

HostTensor HostTensor::ints(Shape shape, std::vector<int64_t> data) {
  FSDPC_CHECK(static_cast<int64_t>(data.size()) == numel(shape)) << "data does not fill " << shape_str(shape);
  HostTensor t;
  t.shape = std::move(shape);
  t.dtype = DType::i64;
  t.i64 = std::move(data);
  return t;
}

namespace {

const EngineOptions& before_collectives(const EngineOptions& options, const EngineTraces& traces) {
  if (options.before_collectives) options.before_collectives(traces);
  return options;
}

}  // namespace

Engine::Engine(const EngineTraces& traces, std::vector<ParamPlan> plans, const EngineOptions& options)
    : options_(before_collectives(options, traces)),
      mpi_(std::make_unique<MpiContext>(options_.mesh)),
      device_(open_rank_device(options_.target, *mpi_)),
      allocator_(device_->backend(), options.mem_cap) {
  if (options_.grad_accum < 1) fail("--grad-accum must be at least 1, got ", options_.grad_accum);
  check_lr_schedule(options_.lr_schedule, options_.optimizer.lr);
  if (options_.target == Target::cpu) {
    // The CPU kernels share the host's cores among its ranks. Collective
    // over the world, as building the communicators just was.
    set_cpu_ranks_per_host(mpi_ranks_on_host());
    cpu_threads();  // a bad FSDPC_CPU_THREADS fails here, before any work
  }
  auto lowered = [&](const StepTraces& t) {
    return StepTraces{execution_trace(t.forward, options_.target, options_.fusion),
                      execution_trace(t.backward, options_.target, options_.fusion)};
  };
  sync_ = lowered(traces.sync);
  eval_forward_ = without_head_grads(sync_.forward);
  if (options_.no_sync && options_.grad_accum > 1) {
    FSDPC_CHECK(traces.no_sync && traces.accumulate) << "no_sync accumulation needs its traces";
    no_sync_ = lowered(*traces.no_sync);
    accumulate_ = lowered(*traces.accumulate);
  }
  if (options_.keep_gathered) {
    FSDPC_CHECK(traces.gathered) << "keep_gathered needs the gather, reduce and micro-batch traces";
    if (options_.no_sync) fail("--keep-gathered reduces the gradients once per step already; drop --no-sync");
    gathered_ = GatheredStep{execution_trace(traces.gathered->gather, options_.target, options_.fusion),
                             execution_trace(traces.gathered->reduce, options_.target, options_.fusion),
                             lowered(traces.gathered->micro)};
  }
  if (traces.outer) outer_ = lower_outer_step(*traces.outer, options_.target, options_.fusion);
  // The CPU fusion executor's regions compile here, all at once on every
  // thread of the rank, rather than one by one as the first step meets them.
  if (options_.target == Target::cpu && options_.fusion == FusionMode::automatic) {
    std::vector<const Trace*> traces = {&sync_.forward, &sync_.backward};
    for (const std::optional<StepTraces>* t : {&no_sync_, &accumulate_})
      if (t->has_value()) traces.insert(traces.end(), {&(*t)->forward, &(*t)->backward});
    if (gathered_)
      traces.insert(traces.end(), {&gathered_->gather, &gathered_->reduce, &gathered_->micro.forward,
                                   &gathered_->micro.backward});
    if (outer_)
      for (const OuterFragment& f : outer_->fragments)
        for (const Trace* t : f.traces()) traces.push_back(t);
    fusion::precompile_regions(traces);
  }
  interpreter_ = std::make_unique<Interpreter>(allocator_, executors_for(options_.target), device_->kernels(),
                                               [this] { device_->progress(); });

  std::unordered_map<std::string, ParamPlan> by_path;
  for (ParamPlan& p : plans) {
    full_shapes_[p.path] = p.full_shape;
    by_path[p.path] = std::move(p);
  }
  const std::string shard_group = options_.mesh.replicas == 1 ? "dp" : "shard";
  const Trace& forward = sync_.forward;
  for (size_t i = 0; i < forward.args.size(); ++i) {
    const Proxy& a = forward.args[i];
    if (!a.is_param()) continue;
    auto it = by_path.find(a.param_path);
    FSDPC_CHECK(it != by_path.end()) << "no initialisation plan for parameter " << a.param_path;
    Param p{it->second, i, allocate_tensor(allocator_, a.type, MemCategory::parameters), 0, "", a.requires_grad,
            std::nullopt};
    const Shape& full = p.plan.full_shape;
    // Tensor parallelism cut the parameter first (by the plan the tp pass
    // ran with); FSDP then shards this rank's part by rows.
    std::optional<TensorParallelSplit> split;
    Shape local = full;
    if (options_.mesh.tp > 1 && (split = options_.tensor_parallel_plan.split(p.plan.path, full, options_.mesh.tp)))
      local = tensor_parallel_part_shape(*split, full, options_.mesh.tp);
    int64_t rows = local.empty() ? 1 : local[0];
    if (a.type.dist == DistType::fully_sharded) {
      p.group = shard_group;
      rows = a.type.shape[0];
      p.row_begin = mpi_->groups().rank_in(shard_group) * rows;
    }
    // Each rank materialises only its own rows: on the host straight into
    // the parameter, elsewhere through a host buffer.
    auto init = [&](float* out) {
      if (split)
        init_tp_shard(out, full, *split, options_.mesh.tp, mpi_->groups().rank_in("tp"), p.row_begin, rows,
                      p.plan.init, options_.seed);
      else
        init_shard(out, full, p.row_begin, rows, p.plan.init, options_.seed, p.plan.path);
    };
    if (backend().device().kind == DeviceKind::cpu) {
      init(static_cast<float*>(p.value.data()));
    } else {
      std::vector<float> host(static_cast<size_t>(numel(a.type.shape)));
      init(host.data());
      to_device(p.value, host);
    }
    p.tp_split = split;
    params_.push_back(std::move(p));
  }
  if (gathered_) bind_gathered_step();
  if (outer_) bind_outer_step();
  optimizer_ = std::make_unique<Optimizer>(options_.optimizer, allocator_);
}

// Members go in reverse order, so the interpreter and allocator would free
// the buffers of collectives still in flight (an error unwinding mid-step)
// before ~MpiContext waits for them, and MPI would then touch freed memory.
// An exchange still in flight (training stopped within its delay) lands
// first, so no collective is left without its wait.
Engine::~Engine() {
  if (!in_flight_.empty() && std::uncaught_exceptions() == 0) {
    try {
      land_in_flight();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fsdpc: landing DiLoCo's exchanges in flight at teardown: %s\n", e.what());
    }
  }
  if (mpi_) mpi_->complete_all();
}

DeviceBackend& Engine::backend() { return allocator_.backend(); }

void Engine::to_device(const TensorValue& v, const std::vector<float>& host) {
  FSDPC_CHECK(static_cast<int64_t>(host.size()) == numel(v.type.shape)) << "host buffer size";
  backend().copy_from_host(v.data(), host.data(), host.size() * sizeof(float));
}

std::vector<float> Engine::to_host(const TensorValue& v) {
  std::vector<float> host(static_cast<size_t>(numel(v.type.shape)));
  backend().copy_to_host(host.data(), v.data(), host.size() * sizeof(float));
  return host;
}

int Engine::rank() const { return mpi_->groups().rank(); }

// Bounded by the collective watchdog and recorded in the flight recorder
// under `label`, like the trace's collectives (mpi_world.h).
double Engine::all_reduce_sum(double v, const std::string& group, const char* label) {
  double out = 0;
  const auto t0 = profiler_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  watched_allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, mpi_->groups().comm(group), label, group);
  if (profiler_)
    profiler_->blocking_collective("all_reduce", label, group, mpi_->groups().comm(group), sizeof out, t0,
                                   std::chrono::steady_clock::now());
  return out;
}

void Engine::set_profiler(Profiler* profiler) {
  profiler_ = profiler;
  interpreter_->set_profiler(profiler);
  mpi_->set_timeline(profiler);  // the CPU's collectives (the NCCL path is not recorded)
}

TensorValue Engine::cotangent_value(const TensorType& type, double cotangent) {
  TensorValue ct = allocate_tensor(allocator_, type, MemCategory::activations);
  const float value = static_cast<float>(cotangent);
  backend().copy_from_host(ct.data(), &value, sizeof value);
  return ct;
}

std::vector<TensorValue> Engine::forward_args(const Trace& forward, const std::vector<HostTensor>& inputs,
                                              double cotangent) {
  std::vector<TensorValue> args(forward.args.size());
  size_t next_input = 0;
  for (size_t i = 0; i < forward.args.size(); ++i) {
    const Proxy& a = forward.args[i];
    if (a.is_param()) continue;
    if (a.name == kCotangentArg) {  // the fused head's gradients in the forward (passes/head_grad_forward.h)
      args[i] = cotangent_value(a.type, cotangent);
      continue;
    }
    if (next_input >= inputs.size())
      fail("train_step: the model takes ", forward.args.size() - params_.size(), " inputs, got ", inputs.size());
    const HostTensor& h = inputs[next_input++];
    if (h.shape != a.type.shape || h.dtype != a.type.dtype)
      fail("input ", a.name, ": expected ", dtype_name(a.type.dtype), shape_str(a.type.shape), ", got ",
           dtype_name(h.dtype), shape_str(h.shape));
    args[i] = allocate_tensor(allocator_, a.type, MemCategory::activations);
    const void* src = h.dtype == DType::f32 ? static_cast<const void*>(h.f32.data()) : h.i64.data();
    backend().copy_from_host(args[i].data(), src, static_cast<size_t>(numel(h.shape) * dtype_size(h.dtype)));
  }
  if (next_input != inputs.size()) fail("train_step: too many inputs (", inputs.size(), ")");
  if (gathered_values_.empty()) {
    for (const Param& p : params_) args[p.arg] = p.value;
    return args;
  }
  for (size_t i = 0; i < forward.args.size(); ++i)  // keep_gathered: the full parameters
    if (forward.args[i].is_param()) {
      auto it = gathered_values_.find(forward.args[i].param_path);
      FSDPC_CHECK(it != gathered_values_.end()) << "no gathered value of " << forward.args[i].param_path;
      args[i] = it->second;
    }
  return args;
}

std::vector<HostTensor> micro_batch(const std::vector<HostTensor>& inputs, int k, int count) {
  std::vector<HostTensor> out;
  for (const HostTensor& h : inputs) {
    if (h.shape.empty() || h.shape[0] % count != 0)
      fail("--grad-accum ", count, ": the per-rank batch ", h.shape.empty() ? 0 : h.shape[0],
           " does not split into equal micro-batches");
    HostTensor m = h;
    m.shape[0] = h.shape[0] / count;
    const size_t n = static_cast<size_t>(numel(m.shape)), off = n * static_cast<size_t>(k);
    if (h.dtype == DType::f32) m.f32.assign(h.f32.begin() + off, h.f32.begin() + off + n);
    else m.i64.assign(h.i64.begin() + off, h.i64.begin() + off + n);
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<TensorValue> Engine::backward_args(const Trace& backward, std::vector<TensorValue> saved,
                                               const std::vector<TensorValue>& acc, double cotangent) {
  // The backward takes the saved values, then acc_* (accumulated unsharded
  // gradients, by parameter), then the cotangent of the loss (which a
  // pipeline stage before the last receives instead).
  std::vector<TensorValue> bargs = std::move(saved);
  for (size_t i = bargs.size(); i < backward.args.size(); ++i) {
    const std::string& name = backward.args[i].name;
    if (name == kCotangentArg) {
      bargs.push_back(cotangent_value(backward.args[i].type, cotangent));
      continue;
    }
    // acc[g] belongs to the g-th parameter that requires grad; the backward
    // names each one acc_<parameter proxy>, in its own order.
    FSDPC_CHECK(name.rfind("acc_", 0) == 0) << "unexpected backward argument " << name;
    size_t g = 0;
    bool found = false;
    for (const Param& p : params_) {
      if (!p.requires_grad) continue;
      if ("acc_" + param_proxy_name(p.plan.path) == name) {
        bargs.push_back(acc.at(g));
        found = true;
        break;
      }
      ++g;
    }
    FSDPC_CHECK(found) << "no accumulated gradient for " << name;
  }
  FSDPC_CHECK(bargs.size() == backward.args.size()) << "backward argument count";
  return bargs;
}

double Engine::micro_step(const StepTraces& t, const std::vector<HostTensor>& inputs, double cotangent,
                          const std::vector<TensorValue>& acc, std::vector<TensorValue>& grads) {
  ProfileSpan forward_span(profiler_, "forward");
  std::vector<TensorValue> outs = interpreter_->run(t.forward, forward_args(t.forward, inputs, cotangent));
  forward_span.end();
  const size_t n_out = t.forward.returns.items.at(0).items.size();
  const TensorValue loss = outs.at(0);
  if (numel(loss.type.shape) != 1 || loss.type.dtype != DType::f32)
    fail("train_step: the model's first output is ", type_str(loss.type), "; training needs a scalar f32 loss");
  std::vector<TensorValue> bargs =
      backward_args(t.backward, {outs.begin() + static_cast<long>(n_out), outs.end()}, acc, cotangent);
  outs.clear();
  ProfileSpan backward_span(profiler_, "backward");
  grads = interpreter_->run(t.backward, std::move(bargs));
  backward_span.end();
  for (TensorValue& g : grads) allocator_.recategorize(*g.storage, MemCategory::gradients);
  // Read after the backward was issued: on a GPU the copy waits for the
  // stream, and the backward should not wait for the copy.
  float loss_value = 0;
  backend().copy_to_host(&loss_value, loss.data(), sizeof loss_value);
  return loss_value;
}

void Engine::add_into(std::vector<TensorValue>& sum, std::vector<TensorValue>& grads) {
  if (sum.empty()) {
    sum = std::move(grads);
    return;
  }
  for (size_t i = 0; i < sum.size(); ++i)
    backend().add_into(static_cast<float*>(sum[i].data()), static_cast<const float*>(grads[i].data()),
                       numel(sum[i].type.shape));
  grads.clear();
}

StepResult Engine::train_step(const std::vector<HostTensor>& inputs) {
  auto t0 = std::chrono::steady_clock::now();
  const int k_total = options_.grad_accum;
  // The loss is the mean over micro-batches: each backward's cotangent is 1/K.
  const double ct = 1.0 / k_total;
  std::vector<TensorValue> grads, sum, local;  // local: unsharded no_sync gradients
  double loss_sum = 0;
  // The full parameters live from the gather to the reduce, and never past
  // the step (an error mid-step included): forward() reads the shards.
  struct DropGathered {
    std::unordered_map<std::string, TensorValue>& values;
    ~DropGathered() { values.clear(); }
  } drop_gathered{gathered_values_};
  if (gathered_) gather_parameters();
  // DiLoCo: a round starts from the parameters of its first step.
  if (outer_ && anchors_.empty()) start_outer_round();
  if (options_.mesh.pp > 1) loss_sum = pipeline_micro_batches(inputs, gathered_ ? local : sum);
  for (int k = 0; k < k_total && options_.mesh.pp == 1; ++k) {
    std::vector<HostTensor> micro = k_total == 1 ? inputs : micro_batch(inputs, k, k_total);
    if (gathered_) {
      loss_sum += micro_step(gathered_->micro, micro, ct, {}, grads);
      add_into(local, grads);
    } else if (!no_sync_) {
      loss_sum += micro_step(sync_, micro, ct, {}, grads);
      add_into(sum, grads);
    } else if (k + 1 < k_total) {
      loss_sum += micro_step(*no_sync_, micro, ct, {}, grads);
      add_into(local, grads);
    } else {
      loss_sum += micro_step(*accumulate_, micro, ct, local, sum);
      local.clear();
    }
  }
  if (gathered_) sum = reduce_gradients(std::move(local));

  sum_tied_gradients(sum);

  // The gradients, one per parameter that requires grad, in argument order.
  std::vector<ParamRef> refs;
  GradViews sharded, replicated;  // for the clipping norm
  GradViews sharded_tp, replicated_tp;  // the same, of parameters tensor parallelism cut
  size_t g = 0;
  for (Param& p : params_) {
    if (!p.requires_grad) continue;
    TensorValue& grad = sum.at(g++);
    float* d = static_cast<float*>(grad.data());
    int64_t n = numel(grad.type.shape);
    refs.push_back({p.plan.path, static_cast<float*>(p.value.data()), d, n});
    // A tied parameter's summed gradient is on the first and last stage:
    // the norm counts it on the first.
    if (is_tied(p) && pipeline_stage() > 0) continue;
    if (grad.type.dist == DistType::fully_sharded)
      (p.tp_split ? sharded_tp : sharded).emplace_back(d, n);
    else
      (p.tp_split ? replicated_tp : replicated).emplace_back(d, n);
  }
  StepResult r;
  float grad_scale = 1.0f;
  if (options_.clip > 0) {
    // Shards of one gradient live on the ranks of its shard group; replicas
    // hold the same rows, so the sum runs over the shard group only.
    const std::string group = options_.mesh.replicas == 1 ? "dp" : "shard";
    ProfileSpan clip_span(profiler_, "clip");
    auto over_shards = [&](double local) { return all_reduce_sum(local, group, "clip sum of squares"); };
    ClipCoefficient c;
    if (options_.mesh.tp == 1 && options_.mesh.pp == 1) {
      c = clip_grad_coefficient(backend(), sharded, replicated, options_.clip, over_shards);
    } else {
      // A gradient tensor parallelism cut is also spread over the tp group;
      // one it left whole is the same on every tp rank, counted once.
      const double cut = over_shards(sum_of_squares(backend(), sharded_tp)) + sum_of_squares(backend(), replicated_tp);
      double squares = over_shards(sum_of_squares(backend(), sharded)) + sum_of_squares(backend(), replicated) +
                       (options_.mesh.tp > 1 ? all_reduce_sum(cut, "tp", "clip sum of squares") : cut);
      // Each pipeline stage holds its own parameters.
      if (options_.mesh.pp > 1) squares = all_reduce_sum(squares, "pp", "clip sum of squares");
      c = clip_coefficient(squares, options_.clip);
    }
    r.grad_norm = c.norm;
    grad_scale = c.scale;  // applied as the optimizer reads each gradient
  }
  // The optimizer's step count is the global step, also after a resume.
  r.lr = scheduled_lr(options_.lr_schedule, options_.optimizer.lr, optimizer_->steps());
  optimizer_->set_lr(r.lr);
  {
    ProfileSpan optimizer_span(profiler_, "optimizer");
    optimizer_->step(refs, grad_scale);
  }
  sum.clear();  // the gradients go before the outer step runs
  if (outer_) r.outer = outer_after_update(optimizer_->steps());
  device_->end_step();
  r.collectives = device_->take_collective_times();
  // The tp ranks of a group compute the same loss: the mean is over dp.
  r.loss = mean_over_ranks(loss_sum / k_total);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::vector<HostTensor> Engine::forward(const std::vector<HostTensor>& inputs) {
  std::vector<TensorValue> outs = interpreter_->run(eval_forward_, forward_args(eval_forward_, inputs));
  device_->end_step();
  const size_t n_out = eval_forward_.returns.items.at(0).items.size();
  std::vector<HostTensor> result;
  for (size_t i = 0; i < n_out; ++i) {
    const TensorValue& v = outs[i];
    FSDPC_CHECK(v.type.dtype == DType::f32) << "forward outputs are f32";
    result.push_back(HostTensor::floats(v.type.shape, to_host(v)));
  }
  return result;
}

double Engine::mean_over_ranks(double local) {
  // Only the last pipeline stage computes the loss; pp carries it to all.
  const bool holds = options_.mesh.pp == 1 || pipeline_stage() + 1 == options_.mesh.pp;
  double sum = all_reduce_sum(holds ? local : 0.0, "dp", "mean over ranks");
  if (options_.mesh.pp > 1) sum = all_reduce_sum(sum, "pp", "mean over ranks");
  return sum / options_.mesh.data_parallel();
}

// Over every rank: with tensor parallelism the dp group is only the ranks of
// this tp index, and a checkpoint's folder must exist for all of them.
void Engine::barrier() { watched_barrier(MPI_COMM_WORLD, "barrier", "world"); }

std::vector<Engine::Shard> Engine::shards() const {
  std::vector<Shard> out;
  for (const Param& p : params_) out.push_back({p.plan.path, &p.value, p.row_begin});
  return out;
}

}  // namespace fsdpc
