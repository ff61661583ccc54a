// One training configuration's step, as one JSON line (rank 0 prints), for
// bench/multinode_bench.sh, which runs it on shared memory and across two
// emulated nodes (tools/netns_cluster.sh):
//   mpirun -np N build/bench/multinode_bench STRATEGY [R,S] [STEPS]
//   mpirun -np N build/bench/multinode_bench overlap [MB] [COMPUTE_MS]
// The model is docs/performance.md's "4 layers x 512 wide, vocab 8192" GPT-2 with
// 4x256 tokens per rank, unit buckets, AdamW (as bench/train_bench.cpp).
// Prints the median step, the rank's compute time, and the time it sat
// blocked in waits (communication not hidden), per step, with the MPI
// progress mode (FSDPC_MPI_PROGRESS), and the CPU time the rank's process
// used per step (all its threads, user + system, so the kernel's TCP work
// and a progress thread show) with how often another process preempted it
// (involuntary context switches: a busy machine) and how many MPI calls the
// progress thread made (thread mode). A benchmark: it asserts
// nothing.
// `overlap` isolates the mechanism: one all_gather of MB megabytes (the
// result) started through the MPI executor's context, then one "kernel" of
// COMPUTE_MS that makes no MPI call, then the wait; it prints the time
// blocked in that wait against the gather's time alone.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "executors/comm/mpi_check.h"
#include "executors/comm/mpi_executor.h"
#include "executors/comm/mpi_world.h"
#include "frontend/models/gpt2/gpt2.h"
#include "frontend/jit.h"
#include "ir/error.h"
#include "passes/strategy.h"
#include "runtime/data.h"

using namespace fsdpc;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

void overlap(double mb, double compute_ms) {
  const int world = mpi_world_size();
  MpiContext ctx(flat_mesh(world));
  MPI_Comm comm = ctx.groups().comm("dp");
  const int n = static_cast<int>(mb * 1e6 / 4 / world);
  std::vector<float> in(static_cast<size_t>(n), 1.0f), out(static_cast<size_t>(n) * world);
  // Returns the time blocked in the wait.
  auto gather = [&](double busy_ms) {
    FSDPC_MPI_CHECK(MPI_Barrier(comm));
    PendingCollective p;
    p.result = out.data();
    p.bytes = static_cast<int64_t>(out.size()) * 4;
    FSDPC_MPI_CHECK(MPI_Iallgather(in.data(), n, MPI_FLOAT, out.data(), n, MPI_FLOAT, comm, &p.request));
    const CollectiveInfo info{"all_gather", "probe", "", "dp", comm, n, "f32", p.bytes};
    ctx.start("probe", std::move(p), info);
    const auto t0 = Clock::now();
    volatile double x = 1;
    while (ms_since(t0) < busy_ms)
      for (int i = 0; i < 1000; ++i) x = x * 1.0000001 + 1e-9;
    const auto t1 = Clock::now();
    PendingCollective q = ctx.take("probe");
    ctx.complete(q);
    return ms_since(t1);
  };
  gather(0);  // connections, buffers
  std::vector<double> alone, waited;
  for (int r = 0; r < 3; ++r) alone.push_back(gather(0));
  for (int r = 0; r < 3; ++r) waited.push_back(gather(compute_ms));
  std::sort(alone.begin(), alone.end());
  std::sort(waited.begin(), waited.end());
  if (mpi_world_rank() == 0)
    std::printf("{\"probe\": \"overlap\", \"world\": %d, \"progress\": \"%s\", \"mb\": %.1f, \"compute_ms\": %.0f, "
                "\"gather_alone_ms\": %.1f, \"wait_after_compute_ms\": %.1f}\n",
                world, mpi_progress_name(mpi_progress()), mb, compute_ms, alone[1], waited[1]);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  mpi_init(&argc, &argv);
  try {
    if (argc > 1 && std::string(argv[1]) == "overlap") {
      overlap(argc > 2 ? std::atof(argv[2]) : 25, argc > 3 ? std::atof(argv[3]) : 200);
      return 0;
    }
    const std::string strategy = argc > 1 ? argv[1] : "zero3";
    const std::string mesh_text = argc > 2 ? argv[2] : "";
    const int steps = argc > 3 ? std::atoi(argv[3]) : 3;
    const int world = mpi_world_size(), rank = mpi_world_rank();
    const GPT2Config config{4, 8, 512, 8192, 256, 1e-5};
    const int64_t batch = 4, seq = 256;
    GPT2 model("gpt2-4x512", config);
    JitOptions o;
    o.capture.batch = batch;
    o.capture.seq = seq;
    const auto s = parse_strategy(strategy);
    if (!s) fail("unknown strategy ", strategy);
    o.pipeline.strategy = *s;
    o.pipeline.mesh = flat_mesh(world);
    if (!mesh_text.empty()) {
      const size_t comma = mesh_text.find(',');
      o.pipeline.mesh = Mesh{std::stoi(mesh_text.substr(0, comma)), std::stoi(mesh_text.substr(comma + 1))};
    }
    o.pipeline.bucketing = true;
    // no_shard's gradient bucket size (MiB; PyTorch DDP's 25 by default):
    // smaller buckets start the first all_reduce earlier on a slow link.
    if (const char* mb = std::getenv("BUCKET_MB")) o.pipeline.bucket_mb = std::atof(mb);
    o.pipeline.verify = false;
    o.engine.optimizer.lr = 1e-3;
    auto compiled = jit(model, o);
    Engine& e = compiled->engine();
    SyntheticTokens data(0, config.vocab_size);
    std::vector<int64_t> idx(static_cast<size_t>(batch * seq)), tgt(idx.size());
    auto step = [&](int i) {
      data.batch(i, rank, world, batch, seq, idx.data(), tgt.data());
      return compiled->train_step({HostTensor::ints({batch, seq}, idx), HostTensor::ints({batch, seq}, tgt)});
    };
    step(0);  // primitives, optimizer state
    e.interpreter().reset_timing();
    auto usage = [] {
      rusage u{};
      getrusage(RUSAGE_SELF, &u);
      return u;
    };
    auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
    const rusage u0 = usage();
    const uint64_t probes0 = mpi_progress_probes();
    std::vector<double> times;
    double loss = 0;
    for (int i = 1; i <= steps; ++i) {
      const StepResult r = step(i);
      times.push_back(r.seconds);
      loss = r.loss;
    }
    const rusage u1 = usage();
    const double probes = static_cast<double>(mpi_progress_probes() - probes0);
    const double cpu_s = seconds(u1.ru_utime) - seconds(u0.ru_utime) + seconds(u1.ru_stime) - seconds(u0.ru_stime);
    const double preempted = static_cast<double>(u1.ru_nivcsw - u0.ru_nivcsw);
    std::sort(times.begin(), times.end());
    const Interpreter::Timing& tm = e.interpreter().timing();
    if (rank == 0)
      std::printf(
          "{\"strategy\": \"%s\", \"mesh\": \"%dx%d\", \"world\": %d, \"progress\": \"%s\", \"steps\": %d, "
          "\"step_ms\": %.1f, \"step_ms_min\": %.1f, \"compute_ms\": %.1f, \"wait_ms\": %.1f, \"cpu_ms\": %.1f, "
          "\"preempted_per_step\": %.0f, \"progress_probes_per_step\": %.0f, \"loss\": %.6f}\n",
          strategy.c_str(), o.pipeline.mesh.replicas, o.pipeline.mesh.shards, world,
          mpi_progress_name(mpi_progress()), steps, times[times.size() / 2] * 1e3, times.front() * 1e3,
          tm.compute_s / steps * 1e3, tm.wait_s / steps * 1e3, cpu_s / steps * 1e3, preempted / steps, probes / steps, loss);
    std::fflush(stdout);
  } catch (const Error& err) {
    std::fprintf(stderr, "multinode_bench: %s\n", err.what());
    mpi_abort(2);
  }
  return 0;
}
