// jit-compile GPT-2 (tiny) for ZeRO-3 over the ranks of mpirun and train it
// on synthetic tokens:  mpirun -np 2 build/examples/train_gpt2
// It exits non-zero unless the loss stays finite and falls, and the state
// dict gathered on rank 0 holds every parameter of the model, full size.
#include <cmath>
#include <cstdio>

#include "executors/comm/world.h"
#include "frontend/jit.h"
#include "frontend/models/registry.h"
#include "runtime/data.h"

int main() {
  fsdpc::mpi_init();
  const int world = fsdpc::mpi_world_size(), rank = fsdpc::mpi_world_rank();
  auto model = fsdpc::make_model("gpt2-tiny");

  fsdpc::JitOptions o;
  o.capture.batch = 4;  // sequences per rank
  o.capture.seq = 32;
  o.pipeline.strategy = fsdpc::Strategy::zero3;
  o.pipeline.mesh = fsdpc::flat_mesh(world);
  o.engine.optimizer.lr = 3e-3;
  o.engine.clip = 1.0;
  auto compiled = fsdpc::jit(*model, o);

  fsdpc::SyntheticTokens data(/*seed=*/0, /*vocab=*/256);
  double first = 0, last = 0;  // the global batch's mean: the same on every rank
  for (int step = 0; step < 20; ++step) {
    std::vector<int64_t> idx(4 * 32), targets(4 * 32);
    data.batch(step, rank, world, 4, 32, idx.data(), targets.data());
    auto r = compiled->train_step({fsdpc::HostTensor::ints({4, 32}, idx), fsdpc::HostTensor::ints({4, 32}, targets)});
    if (rank == 0) std::printf("step %2d  loss %.4f\n", step, r.loss);
    if (!std::isfinite(r.loss)) {
      std::fprintf(stderr, "rank %d: step %d: the loss is not finite\n", rank, step);
      return 1;
    }
    (step == 0 ? first : last) = r.loss;
  }
  if (!(last < first)) {
    std::fprintf(stderr, "rank %d: the loss did not fall: %.4f -> %.4f\n", rank, first, last);
    return 1;
  }

  auto state = compiled->full_state_dict();  // gathered on rank 0, empty elsewhere
  if (rank != 0) return 0;
  const auto params = model->named_parameters();
  if (state.size() != params.size()) {
    std::fprintf(stderr, "full_state_dict: %zu parameters, the model has %zu\n", state.size(), params.size());
    return 1;
  }
  for (const auto& p : params) {
    auto it = state.find(p.path);
    if (it == state.end()) {
      std::fprintf(stderr, "full_state_dict: no %s\n", p.path.c_str());
      return 1;
    }
    const fsdpc::HostTensor& t = it->second;
    if (t.shape != p.spec->shape || static_cast<int64_t>(t.f32.size()) != fsdpc::numel(p.spec->shape)) {
      std::fprintf(stderr, "full_state_dict: %s is %s with %zu values, the model's is %s\n", p.path.c_str(),
                   fsdpc::shape_str(t.shape).c_str(), t.f32.size(), fsdpc::shape_str(p.spec->shape).c_str());
      return 1;
    }
    for (float v : t.f32)
      if (!std::isfinite(v)) {
        std::fprintf(stderr, "full_state_dict: %s holds %f\n", p.path.c_str(), v);
        return 1;
      }
  }
  std::printf("full_state_dict: %zu parameters, as the model's, all finite; wte %s\n", state.size(),
              fsdpc::shape_str(state["wte.weight"].shape).c_str());
  return 0;
}
