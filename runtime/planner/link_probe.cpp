// The link probe (fsdpc link-probe): the link between this MPI world's ranks, measured as the
// runtime uses it and as the step simulator's alpha-beta model reads it
// (runtime/planner/step_simulator.h). Run under mpirun; `advise --hardware local`
// runs it for its world, and a user may run it across real nodes to write
// the inter_node part of a profile. Every collective goes through the
// Interpreter, the MPI executor and its progress polls, as in `fsdpc train`:
//  - latency: an all_gather of one element a rank, issue to wait, divided
//    by the ring's p - 1 steps;
//  - bandwidth: an all_gather of `--bytes`, less the small one's time, read
//    as (p - 1)/p of the bytes over the link; reduce_scatter_bandwidth and
//    all_reduce_bandwidth the same of those (the all_reduce's ring moves
//    its bytes twice), which Open MPI reduces on the host, far below its
//    all_gather's rate;
//  - host_overhead and host_bandwidth: what a collective in flight costs
//    the compute stream. A chain of matmuls runs alone, then with an
//    all_gather started every kGap statements and waited kGap statements
//    later (it completes behind the compute, as a prefetched gather does);
//    the difference a collective, host_overhead for small gathers, and the
//    bytes of large ones over their extra cost host_bandwidth: over shared
//    memory the rank's own thread copies them in MPI's progress calls, so
//    communication "behind" compute still takes the compute's time. The
//    model priced both at nothing before, and predicted 2-rank steps 10-31%
//    short. On a slow link a gather outlasts kGap small matmuls, and the
//    difference would be the wait for the link, not host work (at 100
//    Mbit/s: "host_bandwidth" 11.6 MB/s, the link's own rate), so each
//    chain's matmuls grow until kGap of them take twice the gather's
//    transfer as the link figures above price it.
// The runtime's collective watch (the watchdog and its flight recorder) is
// installed as train installs it. Every rank runs the same number of
// repetitions (no time budget: ranks would disagree on it and hang), and
// each figure is the slowest rank's median (for the host time, of the
// differences between interleaved batches of the two chains).
#include "runtime/planner/link_probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "executors/claim.h"
#include "executors/comm/mpi_check.h"
#include "executors/comm/mpi_executor.h"
#include "executors/cpu/cpu_executor.h"
#include "executors/rank_device.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "passes/del.h"
#include "runtime/interpreter.h"
#include "runtime/planner/planner.h"
#include "runtime/reliability/watchdog.h"

namespace fsdpc {

namespace {

constexpr int kStatements = 240;  // matmuls in a chain
constexpr int kGap = 12;          // matmuls between a collective's issue and its wait

// The two chains host_overhead and host_bandwidth are read from: 8x8
// matmuls (work negligible, launches not) beside 1 KiB gathers a rank, and
// 96x96 ones (about 13 us each here, so that 12 of them outlast the
// transfer) beside 256 KiB ones, large enough that Open MPI's shared memory
// moves them by copies its progress calls make on the rank's own thread.
struct ChainShape {
  int64_t side, shard;
};
constexpr ChainShape kSmallChain{8, 256}, kLargeChain{96, 64 * 1024};
constexpr int64_t kMaxSide = 2048;  // a 2048^3 matmul: about 0.1 s on one core here

Proxy f32_arg(const std::string& name, Shape shape) {
  Proxy p;
  p.name = name;
  p.type.shape = std::move(shape);
  return p;
}

Attrs group_attrs(OpId op, int world) {
  Attrs a{{"group", "dp"}, {"size", int64_t{world}}};
  if (op != OpId::AllReduce) a.set("dim", int64_t{0});
  if (op != OpId::AllGather) a.set("op", "sum");
  return a;
}

// x -> op(x) -> wait on `shard * world` elements: an all_gather's output, a
// reduce_scatter's or an all_reduce's input.
Trace collective_trace(OpId op, int64_t shard, int world) {
  Trace t;
  TraceBuilder b(t);
  const std::string x = b.add_arg(f32_arg("x", {op == OpId::AllGather ? shard : shard * world})).name;
  const Proxy future = b.emit1(op, {Operand::of(x)}, group_attrs(op, world));
  const Proxy done = b.emit1(OpId::Wait, {Operand::of(future.name)});
  t.returns = ReturnTree::tuple({ReturnTree::leaf(done.name)});
  return t;
}

// h = h @ w, kStatements times; with `collectives`, an all_gather of s
// started before every kGap-th matmul and waited kGap matmuls later.
Trace chain_trace(ChainShape shape, bool collectives, int world, int& issued) {
  Trace t;
  TraceBuilder b(t);
  std::string h = b.add_arg(f32_arg("h", {shape.side, shape.side})).name;
  const std::string w = b.add_arg(f32_arg("w", {shape.side, shape.side})).name;
  const std::string s = b.add_arg(f32_arg("s", {shape.shard})).name;
  std::vector<ReturnTree> returns;
  std::string pending;
  issued = 0;
  for (int i = 0; i < kStatements; ++i) {
    if (collectives && i % kGap == 0) {
      if (!pending.empty()) returns.push_back(ReturnTree::leaf(b.emit1(OpId::Wait, {Operand::of(pending)}).name));
      pending = b.emit1(OpId::AllGather, {Operand::of(s)}, group_attrs(OpId::AllGather, world)).name;
      ++issued;
    }
    h = b.emit1(OpId::Matmul, {Operand::of(h), Operand::of(w)}).name;
  }
  if (!pending.empty()) returns.push_back(ReturnTree::leaf(b.emit1(OpId::Wait, {Operand::of(pending)}).name));
  returns.push_back(ReturnTree::leaf(h));
  t.returns = ReturnTree::tuple(std::move(returns));
  return t;
}

class Probe {
 public:
  explicit Probe(int world)
      : mpi_(flat_mesh(world)),
        device_(open_rank_device(Target::cpu, mpi_)),
        allocator_(device_->backend()),
        interpreter_(allocator_, executors_for(Target::cpu), device_->kernels(), [this] { device_->progress(); }) {}

  // This rank's seconds of one run of each trace, a batch's mean per round:
  // 2 warm-up runs each, then kBatches rounds of a batch of `per_batch` runs
  // of each in turn, each batch after a barrier. Interleaved, the traces see the
  // same drift of a shared host's load: a difference of two of them (the
  // host time of collectives) measured one after the other once came out
  // five times too large.
  std::vector<std::vector<double>> seconds(const std::vector<Trace>& traces, int per_batch) {
    constexpr int kBatches = 9;
    struct Ready {
      Trace run;
      std::vector<TensorValue> args;
      std::vector<double> batches;
    };
    std::vector<Ready> ready;
    for (const Trace& t : traces) {
      Ready r{insert_dels(execution_trace(t, Target::cpu, FusionMode::none)), {}, {}};
      for (const Proxy& a : r.run.args) {
        r.args.push_back(allocate_tensor(allocator_, a.type, MemCategory::activations));
        std::fill_n(static_cast<float*>(r.args.back().data()), numel(a.type.shape), 0.125f);
      }
      for (int i = 0; i < 2; ++i) interpreter_.run(r.run, r.args);
      ready.push_back(std::move(r));
    }
    for (int k = 0; k < kBatches; ++k)
      for (Ready& r : ready) {
        FSDPC_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < per_batch; ++i) interpreter_.run(r.run, r.args);
        r.batches.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / per_batch);
      }
    std::vector<std::vector<double>> batches;
    for (Ready& r : ready) batches.push_back(std::move(r.batches));
    return batches;
  }

 private:
  MpiContext mpi_;
  std::unique_ptr<RankDevice> device_;
  Allocator allocator_;
  Interpreter interpreter_;
};

}  // namespace

std::string link_probe(int64_t large_bytes) {
  mpi_init();
  const int world = mpi_world_size();
  if (world < 2) fail("link-probe: needs at least 2 ranks, got ", world, " (run it as mpirun -np N fsdpc link-probe)");
  // Ranks sharing a host share its cores, as in fsdpc train.
  set_cpu_ranks_per_host(mpi_ranks_on_host());
  // Collectives are watched as in fsdpc train: issued to the flight
  // recorder, their waits polled against the timeout.
  install_watchdog({600, (std::filesystem::temp_directory_path() / "fsdpc-flight").string(), mpi_world_rank(), world});
  Probe probe(world);
  const int64_t large_shard = std::max<int64_t>(1, large_bytes / (4 * world));
  // What a rank sends of the large payload in a ring: (p - 1)/p of it.
  const double ring = 4.0 * static_cast<double>(large_shard * world) * (world - 1) / world;
  nlohmann::ordered_json timings;
  double small[3], spread[3];  // each op's small one, and its large one's seconds beyond that
  const OpId ops[3] = {OpId::AllGather, OpId::ReduceScatter, OpId::AllReduce};
  for (int i = 0; i < 3; ++i) {
    small[i] = slowest_rank(median(probe.seconds({collective_trace(ops[i], 1, world)}, 200).at(0)));
    const double large = slowest_rank(median(probe.seconds({collective_trace(ops[i], large_shard, world)}, 3).at(0)));
    timings[std::string(op_name(ops[i]))] = {
        {"small_seconds", small[i]}, {"large_seconds", large}, {"large_bytes", 4 * large_shard * world}};
    spread[i] = std::max(large - small[i], 1e-9);
  }
  const double latency = small[0] / (world - 1);
  const double bandwidth = ring / spread[0], scatter_bandwidth = ring / spread[1];
  const double reduce_bandwidth = 2 * ring / spread[2];  // all_reduce: the ring twice
  // `shape` with matmuls large enough that kGap of them take twice its
  // gather's transfer (latency and bandwidth as just measured): the side
  // scaled by the cube root of the shortfall, measured again, at most 4
  // times and up to kMaxSide. Every rank reads the slowest rank's time, so
  // all choose the same side.
  auto hiding = [&](ChainShape shape) {
    const double transfer = latency * (world - 1) + 4.0 * static_cast<double>(shape.shard) * (world - 1) / bandwidth;
    for (int round = 0; round < 4 && shape.side < kMaxSide; ++round) {
      int issued = 0;
      const double window =
          kGap * slowest_rank(median(probe.seconds({chain_trace(shape, false, world, issued)}, 1).at(0))) / kStatements;
      if (window >= 2 * transfer) break;
      const double grow = std::max(1.25, std::cbrt(2 * transfer / std::max(window, 1e-9)));
      shape.side = std::min(kMaxSide, (static_cast<int64_t>(std::ceil(static_cast<double>(shape.side) * grow)) + 7) / 8 * 8);
    }
    return shape;
  };
  // Host seconds a gathered collective costs the compute stream in each
  // chain, and what a rank sends of it.
  auto chain = [&](ChainShape shape, int per_batch, nlohmann::ordered_json& j) {
    int issued = 0;
    const Trace without = chain_trace(shape, false, world, issued);
    const std::vector<std::vector<double>> t =
        probe.seconds({without, chain_trace(shape, true, world, issued)}, per_batch);
    // The difference of each round's two batches, which ran a moment apart.
    std::vector<double> extra;
    for (size_t k = 0; k < t[0].size(); ++k) extra.push_back(t[1][k] - t[0][k]);
    const double plain = slowest_rank(median(t[0])), with = slowest_rank(median(t[1]));
    j = {{"matmul_side", shape.side},    {"matmuls", kStatements},     {"collectives", issued},
         {"statements_in_flight", kGap}, {"gather_bytes", 4 * shape.shard * world},
         {"plain_seconds", plain},       {"with_collectives_seconds", with}};
    return slowest_rank(median(extra)) / issued;
  };
  nlohmann::ordered_json small_chain, large_chain;
  const ChainShape small_shape = hiding(kSmallChain), large_shape = hiding(kLargeChain);
  // A chain grown for a slow link runs for seconds: one run a batch.
  const double small_cost = chain(small_shape, small_shape.side == kSmallChain.side ? 10 : 1, small_chain);
  const double large_cost = chain(large_shape, large_shape.side == kLargeChain.side ? 4 : 1, large_chain);
  // A difference of two timings can come out at or below zero on a noisy
  // host; a collective's host work is never free.
  const double host = std::max(1e-7, small_cost);
  // The bytes' share: 0 (not measured) when the larger gathers cost no more.
  const double more_bytes = 4.0 * static_cast<double>(kLargeChain.shard - kSmallChain.shard) * (world - 1);
  const double host_bandwidth = large_cost > small_cost ? more_bytes / (large_cost - small_cost) : 0;
  const nlohmann::ordered_json j = {{"ranks", world},
          {"progress", mpi_progress_name(mpi_progress())},
          {"latency", latency},
          {"bandwidth", bandwidth},
          {"reduce_scatter_bandwidth", scatter_bandwidth},
          {"all_reduce_bandwidth", reduce_bandwidth},
          {"host_overhead", host},
          {"host_bandwidth", host_bandwidth},
          {"large_bytes", 4 * large_shard * world},
          {"timings", timings},
          {"chains", {small_chain, large_chain}}};
  return mpi_world_rank() == 0 ? j.dump() + "\n" : "";
}



}  // namespace fsdpc
