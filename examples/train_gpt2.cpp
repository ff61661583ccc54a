// jit-compile GPT-2 (tiny) for ZeRO-3 over the ranks of mpirun and train it
// on synthetic tokens:  mpirun -np 2 build/examples/train_gpt2
#include <cstdio>

#include "executors/comm/mpi_world.h"
#include "frontend/jit.h"
#include "frontend/models.h"
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
  for (int step = 0; step < 20; ++step) {
    std::vector<int64_t> idx(4 * 32), targets(4 * 32);
    data.batch(step, rank, world, 4, 32, idx.data(), targets.data());
    auto r = compiled->train_step({fsdpc::HostTensor::ints({4, 32}, idx), fsdpc::HostTensor::ints({4, 32}, targets)});
    if (rank == 0) std::printf("step %2d  loss %.4f\n", step, r.loss);
  }
  auto state = compiled->full_state_dict();  // gathered on rank 0
  if (rank == 0) std::printf("gathered %zu parameters, wte %s\n", state.size(), fsdpc::shape_str(state["wte.weight"].shape).c_str());
  return 0;
}
