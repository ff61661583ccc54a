// One rank's training step: forward, backward, clip, update, loss.
#include "runtime/engine.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "executors/claim.h"
#include "executors/comm/mpi_check.h"
#include "executors/comm/mpi_executor.h"
#include "ir/error.h"

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

Engine::Engine(const Trace& forward, const Trace& backward, std::vector<ParamPlan> plans,
               const EngineOptions& options)
    : options_(options), allocator_(Device{}, options.mem_cap) {
  mpi_ = std::make_unique<MpiContext>(options_.mesh);
  std::vector<const Executor*> executors = executors_for(options_.executor);
  forward_ = claim(forward, executors);
  backward_ = claim(backward, executors);
  interpreter_ = std::make_unique<Interpreter>(allocator_, executors, *mpi_, [this] { mpi_->progress(); });

  std::unordered_map<std::string, ParamPlan> by_path;
  for (ParamPlan& p : plans) by_path[p.path] = std::move(p);
  const std::string shard_group = options_.mesh.replicas == 1 ? "dp" : "shard";
  for (size_t i = 0; i < forward_.args.size(); ++i) {
    const Proxy& a = forward_.args[i];
    if (!a.is_param()) continue;
    auto it = by_path.find(a.param_path);
    FSDPC_CHECK(it != by_path.end()) << "no initialisation plan for parameter " << a.param_path;
    Param p{it->second, i, allocate_tensor(allocator_, a.type, MemCategory::parameters), 0, "", a.requires_grad};
    const Shape& full = p.plan.full_shape;
    int64_t rows = full.empty() ? 1 : full[0];
    if (a.type.dist == DistType::fully_sharded) {
      p.group = shard_group;
      rows = a.type.shape[0];
      p.row_begin = mpi_->groups().rank_in(shard_group) * rows;
    }
    // Each rank materialises only its own rows.
    init_shard(static_cast<float*>(p.value.data()), full, p.row_begin, rows, p.plan.init, options_.seed, p.plan.path);
    params_.push_back(std::move(p));
  }
  optimizer_ = std::make_unique<Optimizer>(options_.optimizer, allocator_);
}

Engine::~Engine() = default;

int Engine::rank() const { return mpi_->groups().rank(); }

double Engine::all_reduce_sum(double v, const std::string& group) {
  double out = 0;
  FSDPC_MPI_CHECK(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, mpi_->groups().comm(group)));
  return out;
}

std::vector<TensorValue> Engine::forward_args(const std::vector<HostTensor>& inputs) {
  std::vector<TensorValue> args(forward_.args.size());
  size_t next_input = 0;
  for (size_t i = 0; i < forward_.args.size(); ++i) {
    const Proxy& a = forward_.args[i];
    if (a.is_param()) continue;
    if (next_input >= inputs.size())
      fail("train_step: the model takes ", forward_.args.size() - params_.size(), " inputs, got ", inputs.size());
    const HostTensor& h = inputs[next_input++];
    if (h.shape != a.type.shape || h.dtype != a.type.dtype)
      fail("input ", a.name, ": expected ", dtype_name(a.type.dtype), shape_str(a.type.shape), ", got ",
           dtype_name(h.dtype), shape_str(h.shape));
    args[i] = allocate_tensor(allocator_, a.type, MemCategory::activations);
    const void* src = h.dtype == DType::f32 ? static_cast<const void*>(h.f32.data()) : h.i64.data();
    std::memcpy(args[i].data(), src, static_cast<size_t>(numel(h.shape) * dtype_size(h.dtype)));
  }
  if (next_input != inputs.size()) fail("train_step: too many inputs (", inputs.size(), ")");
  for (const Param& p : params_) args[p.arg] = p.value;
  return args;
}

StepResult Engine::train_step(const std::vector<HostTensor>& inputs) {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<TensorValue> outs = interpreter_->run(forward_, forward_args(inputs));
  const size_t n_out = forward_.returns.items.at(0).items.size();
  const TensorValue loss = outs.at(0);
  if (numel(loss.type.shape) != 1 || loss.type.dtype != DType::f32)
    fail("train_step: the model's first output is ", type_str(loss.type), "; training needs a scalar f32 loss");

  std::vector<TensorValue> bargs(outs.begin() + static_cast<long>(n_out), outs.end());
  outs.clear();
  FSDPC_CHECK(bargs.size() + 1 == backward_.args.size()) << "backward takes saved values and the cotangent";
  TensorValue ct = allocate_tensor(allocator_, backward_.args.back().type, MemCategory::activations);
  *static_cast<float*>(ct.data()) = 1.0f;
  bargs.push_back(std::move(ct));
  std::vector<TensorValue> grads = interpreter_->run(backward_, std::move(bargs));

  // The gradients, one per parameter that requires grad, in argument order.
  std::vector<ParamRef> refs;
  double sharded_sq = 0, replicated_sq = 0;
  size_t g = 0;
  for (Param& p : params_) {
    if (!p.requires_grad) continue;
    TensorValue& grad = grads.at(g++);
    allocator_.recategorize(*grad.storage, MemCategory::gradients);
    const float* d = static_cast<const float*>(grad.data());
    int64_t n = numel(grad.type.shape);
    double sq = 0;
    for (int64_t i = 0; i < n; ++i) sq += static_cast<double>(d[i]) * d[i];
    (grad.type.dist == DistType::fully_sharded ? sharded_sq : replicated_sq) += sq;
    refs.push_back({p.plan.path, static_cast<float*>(p.value.data()), d, n});
  }
  StepResult r;
  if (options_.clip > 0) {
    // Shards of one gradient live on the ranks of its shard group; replicas
    // hold the same rows, so the sum runs over the shard group only.
    double total = replicated_sq + (sharded_sq > 0 || options_.mesh.world() > 1
                                        ? all_reduce_sum(sharded_sq, options_.mesh.replicas == 1 ? "dp" : "shard")
                                        : 0.0);
    r.grad_norm = std::sqrt(total);
    if (r.grad_norm > options_.clip) {
      float scale = static_cast<float>(options_.clip / (r.grad_norm + 1e-6));
      for (ParamRef& ref : refs)
        for (int64_t i = 0; i < ref.numel; ++i) const_cast<float*>(ref.grad)[i] *= scale;
    }
  }
  optimizer_->step(refs);
  r.loss = all_reduce_sum(*static_cast<const float*>(loss.data()), "dp") / options_.mesh.world();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::vector<HostTensor> Engine::forward(const std::vector<HostTensor>& inputs) {
  std::vector<TensorValue> outs = interpreter_->run(forward_, forward_args(inputs));
  const size_t n_out = forward_.returns.items.at(0).items.size();
  std::vector<HostTensor> result;
  for (size_t i = 0; i < n_out; ++i) {
    const TensorValue& v = outs[i];
    FSDPC_CHECK(v.type.dtype == DType::f32) << "forward outputs are f32";
    const float* d = static_cast<const float*>(v.data());
    result.push_back(HostTensor::floats(v.type.shape, std::vector<float>(d, d + numel(v.type.shape))));
  }
  return result;
}

std::vector<Engine::Shard> Engine::shards() const {
  std::vector<Shard> out;
  for (const Param& p : params_) out.push_back({p.plan.path, &p.value, p.row_begin});
  return out;
}

std::map<std::string, HostTensor> Engine::full_state_dict() {
  std::map<std::string, HostTensor> out;
  const bool root = rank() == 0;
  for (const Param& p : params_) {
    const float* d = static_cast<const float*>(p.value.data());
    const int64_t n = numel(p.value.type.shape);
    std::vector<float> full;
    if (p.group.empty()) {
      full.assign(d, d + n);
    } else {
      // Each shard group gathers its rows on its first member; world rank 0
      // is the first member of its group (other replicas gather and drop).
      MPI_Comm comm = mpi_->groups().comm(p.group);
      const bool group_root = mpi_->groups().rank_in(p.group) == 0;
      if (group_root) full.resize(static_cast<size_t>(n * mpi_->groups().size(p.group)));
      FSDPC_MPI_CHECK(MPI_Gather(d, static_cast<int>(n), MPI_FLOAT, group_root ? full.data() : nullptr,
                                 static_cast<int>(n), MPI_FLOAT, 0, comm));
      full.resize(static_cast<size_t>(numel(p.plan.full_shape)));  // drop the padding rows
    }
    if (root) out[p.plan.path] = HostTensor::floats(p.plan.full_shape, std::move(full));
  }
  return out;
}

}  // namespace fsdpc
