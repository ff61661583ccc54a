// Plan with the library's planner, as `fsdpc advise` does, then train the
// plan's best candidate with the Trainer, as `fsdpc train` does: stop
// half-way with a checkpoint, resume from it in a fresh Trainer, and check
// that the resumed run ends with exactly the weights of a run that never
// stopped:
//   mpirun -np 2 build/examples/train_and_resume [FOLDER]
// FOLDER (default: a new temporary folder) receives the checkpoint. It exits
// non-zero unless every parameter matches bit for bit.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "executors/comm/world.h"
#include "frontend/models/registry.h"
#include "frontend/trainer/trainer.h"
#include "runtime/planner/planner.h"

namespace {

constexpr int64_t kBatch = 8, kSeq = 32;  // the global batch, split over the ranks

// Every strategy for this world, priced on a shipped profile (two nodes of
// one rank each, measured on the project's development VM), so that every
// rank plans alike; the best candidate that fits is the layout.
fsdpc::Plan plan(int world) {
  fsdpc::PlanRequest r;
  r.world = world;
  r.hardware = "netns-veth";
  r.executor = fsdpc::Target::cpu;
  r.threads = 1;
  const std::unique_ptr<fsdpc::Model> model = fsdpc::make_model("gpt2-tiny");
  return fsdpc::plan_training(r, [&](int64_t batch) {
    fsdpc::CaptureOptions c;
    c.batch = batch ? batch : kBatch / world;
    c.seq = kSeq;
    return fsdpc::capture(*model, c);
  });
}

// gpt2-tiny in the plan's layout, AdamW with a cosine schedule.
fsdpc::TrainOptions options(const fsdpc::Plan& p, int64_t steps) {
  const fsdpc::Candidate& best = p.candidates.front();
  fsdpc::TrainOptions o;
  o.model = "gpt2-tiny";
  o.batch = kBatch;
  o.seq = kSeq;
  o.pipeline = fsdpc::candidate_pipeline(p.setup, best);
  if (best.pp > 1) o.engine.grad_accum = best.micro_batches;
  o.engine.keep_gathered = best.keep_gathered;
  o.engine.optimizer.lr = 3e-3;
  o.engine.lr_schedule.kind = fsdpc::LrSchedule::Kind::cosine;
  o.engine.lr_schedule.warmup_steps = 2;
  o.engine.lr_schedule.decay_steps = 8;  // the whole run's horizon, also for the half that stops at 4
  o.steps = steps;
  o.print = false;
  return o;
}

std::map<std::string, fsdpc::HostTensor> train(fsdpc::TrainOptions o) {
  fsdpc::Trainer trainer(std::move(o));
  trainer.run();
  return trainer.compiled().full_state_dict();  // rank 0's; empty elsewhere
}

}  // namespace

int main(int argc, char** argv) {
  fsdpc::mpi_init(&argc, &argv);
  const int rank = fsdpc::mpi_world_rank();
  namespace fs = std::filesystem;
  const fs::path dir = argc > 1 ? fs::path(argv[1]) : fs::temp_directory_path() / "fsdpc-train-and-resume";
  if (rank == 0) fs::remove_all(dir);

  const fsdpc::Plan p = plan(fsdpc::mpi_world_size());
  if (p.candidates.empty() || !p.candidates.front().fits) {
    std::fprintf(stderr, "train_and_resume: no candidate fits\n");
    return 1;
  }
  if (rank == 0) std::printf("planned: %s (%s)\n", p.candidates.front().name().c_str(), p.candidates.front().flags().c_str());

  const std::map<std::string, fsdpc::HostTensor> straight = train(options(p, 8));

  fsdpc::TrainOptions first = options(p, 4);
  first.save = dir.string();
  first.on_step = [](const fsdpc::StepRecord& r) {
    std::printf("step %lld  loss %.4f\n", static_cast<long long>(r.step), r.result.loss);
  };
  train(first);
  fsdpc::TrainOptions second = options(p, 8);
  second.resume = dir.string();
  second.on_step = first.on_step;
  const std::map<std::string, fsdpc::HostTensor> resumed = train(second);

  if (rank != 0) return 0;
  if (straight.empty() || straight.size() != resumed.size()) {
    std::fprintf(stderr, "train_and_resume: %zu parameters straight, %zu resumed\n", straight.size(), resumed.size());
    return 1;
  }
  for (const auto& [name, t] : straight) {
    const fsdpc::HostTensor& r = resumed.at(name);
    if (t.f32.size() != r.f32.size() || std::memcmp(t.f32.data(), r.f32.data(), t.f32.size() * sizeof(float)) != 0) {
      std::fprintf(stderr, "train_and_resume: %s differs between the straight and the resumed run\n", name.c_str());
      return 1;
    }
  }
  std::printf("train_and_resume: %zu parameters equal bit for bit after resuming at step 4 of 8\n", straight.size());
  return 0;
}
