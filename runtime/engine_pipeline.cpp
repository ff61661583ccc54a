// The engine's pipeline-parallel step (Engine members, runtime/engine.h):
// this rank's stage runs every micro-batch's forward and backward in the
// schedule's order. The stages' traces hold the transfers between them
// (send/recv on group pp, passes/pipeline_p2p.h), so a stage's forward
// blocks until the stage before has sent its activation, and its backward
// until the stage after has sent the gradient; a send never blocks (the MPI
// executor buffers it), so no order of the schedule can deadlock on one.
#include <algorithm>
#include <map>

#include "executors/comm/mpi_check.h"
#include "executors/comm/mpi_executor.h"
#include "ir/error.h"
#include "runtime/engine.h"
#include "runtime/profiler.h"

namespace fsdpc {

int Engine::pipeline_stage() const { return rank() / options_.mesh.stage_world(); }

bool Engine::is_tied(const Param& p) const {
  const std::vector<std::string>& tied = options_.pp_tied_params;
  return options_.mesh.pp > 1 && std::find(tied.begin(), tied.end(), p.plan.path) != tied.end();
}

double Engine::pipeline_micro_batches(const std::vector<HostTensor>& inputs, std::vector<TensorValue>& sum) {
  const int k = options_.grad_accum, stage = pipeline_stage(), stages = options_.mesh.pp;
  const bool last = stage + 1 == stages;
  // With no_sync, micro-batches but the last keep unsharded local gradients
  // (their own traces), which the last one's adds before synchronising. The
  // last forward is the last backward too: both orders run backwards in
  // micro-batch order. With keep_gathered every micro-batch runs the
  // unsynchronised traces on the gathered parameters, summed into `sum`
  // (the caller's local gradients, which it reduces after).
  auto traces_of = [&](int m) -> const StepTraces& {
    if (gathered_) return gathered_->micro;
    if (!no_sync_) return sync_;
    return m + 1 < k ? *no_sync_ : *accumulate_;
  };
  std::map<int, std::vector<TensorValue>> saved;  // by micro-batch, until its backward
  std::vector<TensorValue> local;                 // no_sync: the unsharded gradients so far
  double loss_sum = 0;
  for (const PipelineOp& op : pipeline_order(options_.pp_schedule, stage, stages, k)) {
    const StepTraces& t = traces_of(op.micro_batch);
    if (op.forward) {
      ProfileSpan span(profiler_, "forward");
      const std::vector<HostTensor> micro = k == 1 ? inputs : micro_batch(inputs, op.micro_batch, k);
      std::vector<TensorValue> outs = interpreter_->run(t.forward, forward_args(t.forward, micro, 1.0 / k));
      if (last) {
        // The last stage's first output is the micro-batch's loss; the
        // others' is the activation they sent.
        const TensorValue& loss = outs.at(0);
        if (numel(loss.type.shape) != 1 || loss.type.dtype != DType::f32)
          fail("train_step: the model's first output is ", type_str(loss.type), "; training needs a scalar f32 loss");
        float value = 0;
        backend().copy_to_host(&value, loss.data(), sizeof value);
        loss_sum += value;
      }
      const size_t n_out = t.forward.returns.items.at(0).items.size();
      saved[op.micro_batch].assign(outs.begin() + static_cast<long>(n_out), outs.end());
      continue;
    }
    ProfileSpan span(profiler_, "backward");
    auto it = saved.find(op.micro_batch);
    FSDPC_CHECK(it != saved.end()) << "backward of micro-batch " << op.micro_batch << " before its forward";
    // The step's loss is the mean over micro-batches: the last stage's
    // cotangent is 1/k; the others receive theirs.
    std::vector<TensorValue> bargs = backward_args(t.backward, std::move(it->second), local, 1.0 / k);
    saved.erase(it);
    std::vector<TensorValue> grads = interpreter_->run(t.backward, std::move(bargs));
    if (stage > 0) grads.pop_back();  // the input's gradient, sent to the stage before
    for (TensorValue& g : grads) allocator_.recategorize(*g.storage, MemCategory::gradients);
    if (&t == &sync_ || (gathered_ && &t == &gathered_->micro)) {
      add_into(sum, grads);
    } else if (no_sync_ && &t == &*no_sync_) {
      add_into(local, grads);
    } else {  // accumulate: local's sum is in these, synchronised
      sum = std::move(grads);
      local.clear();
    }
  }
  FSDPC_CHECK(saved.empty()) << "micro-batches without a backward";
  return loss_sum;
}

// The first and the last stage both read a tied parameter (GPT-2's wte: the
// embedding and the LM head), each shard of it the same rows on both: each
// holds its part of the gradient, and both take the sum, as Megatron's
// embedding group does, so the two copies stay equal.
void Engine::sum_tied_gradients(std::vector<TensorValue>& sum) {
  const int stage = options_.mesh.pp > 1 ? pipeline_stage() : 0;
  if (options_.mesh.pp == 1 || (stage > 0 && stage + 1 < options_.mesh.pp)) return;
  size_t g = 0;
  for (const Param& p : params_) {
    if (!p.requires_grad) continue;
    TensorValue& grad = sum.at(g++);
    if (!is_tied(p)) continue;
    std::vector<float> host = to_host(grad);
    std::vector<float> total(host.size());
    watched_allreduce(host.data(), total.data(), static_cast<int>(host.size()), MPI_FLOAT, MPI_SUM,
                      mpi_->groups().comm("pp_tied"), "tied gradient", "pp_tied");
    to_device(grad, total);
  }
}

void Engine::send_stage_state(std::map<std::string, HostTensor>& state) {
  const int w = options_.mesh.stage_world();
  if (rank() % w != 0) return;
  constexpr int kTag = 7101;  // no other message of the engine uses it
  if (rank() > 0) {
    int count = static_cast<int>(state.size());
    FSDPC_MPI_CHECK(MPI_Send(&count, 1, MPI_INT, 0, kTag, MPI_COMM_WORLD));
    for (const auto& [path, t] : state) {
      int length = static_cast<int>(path.size());
      FSDPC_MPI_CHECK(MPI_Send(&length, 1, MPI_INT, 0, kTag, MPI_COMM_WORLD));
      FSDPC_MPI_CHECK(MPI_Send(path.data(), length, MPI_CHAR, 0, kTag, MPI_COMM_WORLD));
      FSDPC_MPI_CHECK(MPI_Send(t.f32.data(), static_cast<int>(t.f32.size()), MPI_FLOAT, 0, kTag, MPI_COMM_WORLD));
    }
    state.clear();  // rank 0 holds the state
    return;
  }
  for (int s = 1; s < options_.mesh.pp; ++s) {
    int count = 0;
    FSDPC_MPI_CHECK(MPI_Recv(&count, 1, MPI_INT, s * w, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (int i = 0; i < count; ++i) {
      int length = 0;
      FSDPC_MPI_CHECK(MPI_Recv(&length, 1, MPI_INT, s * w, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      std::string path(static_cast<size_t>(length), '\0');
      FSDPC_MPI_CHECK(MPI_Recv(path.data(), length, MPI_CHAR, s * w, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      const Shape& shape = full_shapes_.at(path);
      std::vector<float> data(static_cast<size_t>(numel(shape)));
      FSDPC_MPI_CHECK(
          MPI_Recv(data.data(), static_cast<int>(data.size()), MPI_FLOAT, s * w, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      // A tied parameter comes from the first and the last stage, equal.
      state.emplace(path, HostTensor::floats(shape, std::move(data)));
    }
  }
}

}  // namespace fsdpc
