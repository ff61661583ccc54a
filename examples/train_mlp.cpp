// The FSDP tutorial model, jit-compiled for ZeRO-3: its output's mean square
// is the loss, and each rank holds half of every weight with 2 ranks:
//   mpirun -np 2 build/examples/train_mlp
// It exits non-zero unless the loss stays finite and falls.
#include <cmath>
#include <cstdio>

#include "executors/comm/world.h"
#include "frontend/jit.h"
#include "frontend/models/registry.h"
#include "runtime/data.h"

int main() {
  fsdpc::mpi_init();
  const int world = fsdpc::mpi_world_size(), rank = fsdpc::mpi_world_rank();
  auto model = fsdpc::make_model("mlp");  // Linear(64,64) -> Tanh -> Linear(64,64)

  fsdpc::JitOptions o;
  o.capture.batch = 64 / world;  // the global batch of 64 rows, split over the ranks
  o.pipeline.strategy = fsdpc::Strategy::zero3;
  o.pipeline.mesh = fsdpc::flat_mesh(world);
  o.mean_square_loss = true;
  o.engine.optimizer.kind = fsdpc::OptimizerOptions::Kind::sgd;
  o.engine.optimizer.lr = 0.5;
  auto compiled = fsdpc::jit(*model, o);

  for (const auto& shard : compiled->shards())
    if (rank == 0) std::printf("%s: local shard %s\n", shard.path.c_str(), fsdpc::shape_str(shard.value->type.shape).c_str());
  std::vector<double> losses;  // the global batch's mean: the same on every rank
  for (int step = 0; step < 10; ++step) {
    std::vector<float> x(64 / world * 64);
    fsdpc::synthetic_features(/*seed=*/0, step, rank, world, 64 / world, 64, x.data());
    auto r = compiled->train_step({fsdpc::HostTensor::floats({64 / world, 64}, x)});
    if (rank == 0) std::printf("step %d  loss %.6f\n", step, r.loss);
    losses.push_back(r.loss);
  }
  for (double loss : losses)
    if (!std::isfinite(loss)) {
      std::fprintf(stderr, "rank %d: the loss is not finite\n", rank);
      return 1;
    }
  if (!(losses.back() < losses.front())) {
    std::fprintf(stderr, "rank %d: the loss did not fall: %.6f -> %.6f\n", rank, losses.front(), losses.back());
    return 1;
  }
  if (rank == 0) std::printf("train_mlp: loss fell from %.6f to %.6f\n", losses.front(), losses.back());
  return 0;
}
