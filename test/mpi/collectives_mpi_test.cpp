// The MPI executor against the reference executor's simulated collectives:
// each rank runs a tiny trace through the MPI kernels and compares its result
// with what run_spmd computes for it. Run under mpirun with 1 to 4 ranks.
//
// Every rank must make the same MPI calls in the same order, so checks after
// a collective use CHECK (never REQUIRE): a failure on one rank must not send
// it down another path while the others wait for it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

#include "executors/comm/mpi_executor.h"
#include "executors/reference/reference.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "test/mpi/run_mpi.h"

namespace fsdpc {
namespace {

using Catch::Matchers::Contains;
using mpi_test::Data;
using mpi_test::decode;
using mpi_test::encode;
using mpi_test::run_mpi;

int world() { return mpi_world_size(); }
int me() { return mpi_world_rank(); }

// ---- Traces and a minimal interpreter of their collectives ----------------

TensorType tensor(Shape shape, DType d) {
  TensorType t;
  t.shape = std::move(shape);
  t.dtype = d;
  return t;
}

Proxy arg(const std::string& name, TensorType type) {
  Proxy p;
  p.name = name;
  p.type = std::move(type);
  return p;
}

// x -> op(x) -> wait, returning the waited value.
Trace collective_trace(OpId op, const TensorType& x, Attrs attrs) {
  Trace t;
  TraceBuilder tb(t);
  tb.add_arg(arg("x", x));
  const Proxy f = tb.emit1(op, {Operand::of("x")}, std::move(attrs));
  const Proxy w = tb.emit1(OpId::Wait, {Operand::of(f.name)});
  t.returns = ReturnTree::tuple({ReturnTree::leaf(w.name)});
  return t;
}

// Rank r's input: distinct small integers, exact in every dtype and in sums.
Data rank_input(const TensorType& x, int r) {
  Data v(numel(x.shape));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = x.dtype == DType::boolean ? double((i + r) % 2) : 1000.0 * (r + 1) + double(i);
  return v;
}

// What the reference executor computes for this rank, every rank's input
// being rank_input (each rank can build all of them).
std::vector<Data> run_reference(const Trace& t, const Mesh& mesh) {
  std::vector<std::vector<reference::Value>> args(mesh.world());
  for (int r = 0; r < mesh.world(); ++r)
    for (const Proxy& a : t.args)
      args[r].push_back(reference::make_value(a.type, rank_input(a.type, r)));
  const std::vector<std::vector<reference::Value>> all = reference::run_spmd(t, mesh, args);
  std::vector<Data> out;
  for (const reference::Value& v : all[me()]) out.push_back(v.data);
  return out;
}

std::vector<Data> my_inputs(const Trace& t) {
  std::vector<Data> args;
  for (const Proxy& a : t.args) args.push_back(rank_input(a.type, me()));
  return args;
}

// Runs `t` both ways and compares exactly.
void check_against_reference(const Trace& t, const Mesh& mesh, MpiContext& ctx,
                             bool alias_waits = false) {
  const std::vector<Data> got = run_mpi(t, ctx, my_inputs(t), alias_waits);
  const std::vector<Data> want = run_reference(t, mesh);
  CHECK(got == want);
  CHECK(ctx.pending() == 0);
}

// ---- Cases -----------------------------------------------------------------

// Each collective, each dtype it supports, along dim 0 and a later dim, on
// every group of `mesh`.
void check_every_collective(const Mesh& mesh) {
  MpiContext ctx(mesh);
  for (const std::string group : {"dp", "shard", "replicate"}) {
    const int64_t n = mesh.group_size(group);
    for (DType d : {DType::f32, DType::f64, DType::i64, DType::i32}) {
      INFO("rank " << me() << " of " << mesh_description(mesh) << ", group " << group << ", "
                   << dtype_name(d));
      const Attrs g{{"group", group}, {"size", n}};
      auto with = [&](Attrs a, std::initializer_list<std::pair<std::string, AttrValue>> more) {
        for (const auto& [k, v] : more) a.set(k, v);
        return a;
      };
      for (int64_t dim : {0, 1}) {
        check_against_reference(
            collective_trace(OpId::AllGather, tensor({3, 2, 2}, d), with(g, {{"dim", dim}})), mesh,
            ctx);
        const Shape rs = dim == 0 ? Shape{2 * n, 3} : Shape{2, 3 * n, 2};
        check_against_reference(collective_trace(OpId::ReduceScatter, tensor(rs, d),
                                                 with(g, {{"dim", dim}, {"op", "sum"}})),
                                mesh, ctx);
      }
      check_against_reference(
          collective_trace(OpId::AllReduce, tensor({4, 3}, d), with(g, {{"op", "sum"}})), mesh, ctx);
      // Vocab-parallel cross-entropy's row max.
      check_against_reference(
          collective_trace(OpId::AllReduce, tensor({4, 3}, d), with(g, {{"op", "max"}, {"grad", "none"}})), mesh,
          ctx);
      for (int64_t root : {int64_t{0}, n - 1})
        check_against_reference(
            collective_trace(OpId::Broadcast, tensor({5}, d), with(g, {{"root", root}})), mesh,
            ctx);
    }
    // Gathers and broadcasts move any dtype's bytes.
    INFO("bool on group " << group);
    check_against_reference(
        collective_trace(OpId::AllGather, tensor({3}, DType::boolean),
                         {{"group", group}, {"size", n}, {"dim", int64_t{0}}}),
        mesh, ctx);
    check_against_reference(
        collective_trace(OpId::Broadcast, tensor({3}, DType::boolean),
                         {{"group", group}, {"size", n}, {"root", n - 1}}),
        mesh, ctx);
  }
}

// axis_index: each rank's place in each of its groups, as the reference
// numbers the group's members.
void check_axis_index(const Mesh& mesh) {
  MpiContext ctx(mesh);
  for (const std::string group : {"dp", "shard", "replicate", "tp"}) {
    INFO("rank " << me() << " of " << mesh_description(mesh) << ", group " << group);
    Trace t;
    TraceBuilder tb(t);
    const Proxy i = tb.emit1(OpId::AxisIndex, {},
                             Attrs{{"group", group}, {"size", int64_t{mesh.group_size(group)}}, {"device", "cpu"}});
    t.returns = ReturnTree::tuple({ReturnTree::leaf(i.name)});
    check_against_reference(t, mesh, ctx);
    const std::vector<int> members = mesh.group_ranks(group, me());
    CHECK(run_mpi(t, ctx, {}).at(0) ==
          Data{double(std::find(members.begin(), members.end(), me()) - members.begin())});
  }
}

TEST_CASE("every collective on every group of the flat mesh matches the reference", "[flat]") {
  check_axis_index(flat_mesh(world()));
  check_every_collective(flat_mesh(world()));
}

TEST_CASE("every collective on every group of a 2x2 mesh matches the reference", "[mesh2x2]") {
  if (world() != 4) {
    WARN("skipped: a 2x2 mesh needs mpirun -np 4, this job has " << world() << " ranks");
    return;
  }
  check_every_collective(Mesh{2, 2});
  check_axis_index(Mesh{2, 2});
}

TEST_CASE("2x2 mesh communicators hold the mesh's ranks in its order", "[mesh2x2]") {
  if (world() != 4) return;
  ProcessGroups groups(Mesh{2, 2});
  CHECK(groups.size("dp") == 4);
  CHECK(groups.rank_in("dp") == me());
  CHECK(groups.size("shard") == 2);
  CHECK(groups.rank_in("shard") == me() % 2);  // replica-major: shards contiguous
  CHECK(groups.size("replicate") == 2);
  CHECK(groups.rank_in("replicate") == me() / 2);
}

TEST_CASE("padded shards: 64 rows gathered and reduce-scattered over any world", "[flat]") {
  const Mesh mesh = flat_mesh(world());
  MpiContext ctx(mesh);
  const int64_t w = world(), rows = (64 + w - 1) / w;  // 22 rows each over 3 ranks
  if (w == 3) CHECK(rows == 22);
  check_against_reference(collective_trace(OpId::AllGather, tensor({rows, 5}, DType::f32),
                                           {{"group", "dp"}, {"size", w}, {"dim", int64_t{0}}}),
                          mesh, ctx);
  check_against_reference(
      collective_trace(OpId::ReduceScatter, tensor({rows * w, 5}, DType::f32),
                       {{"group", "dp"}, {"size", w}, {"dim", int64_t{0}}, {"op", "sum"}}),
      mesh, ctx);
}

TEST_CASE("a size attribute that is not the group's size is a user error", "[flat]") {
  MpiContext ctx(flat_mesh(world()));
  const int64_t w = world();
  const Trace t = collective_trace(OpId::AllReduce, tensor({4}, DType::f32),
                                   {{"group", "dp"}, {"size", w + 1}, {"op", "sum"}});
  // Every rank sees the same mismatch and throws before any MPI call.
  CHECK_THROWS_AS(run_mpi(t, ctx, my_inputs(t)), Error);
  CHECK_THROWS_WITH(run_mpi(t, ctx, my_inputs(t)),
                    Contains("group 'dp' has " + std::to_string(w) + " ranks") &&
                        Contains("the trace says size=" + std::to_string(w + 1)));
  const Trace unknown = collective_trace(OpId::AllReduce, tensor({4}, DType::f32),
                                         {{"group", "ep"}, {"size", w}, {"op", "sum"}});
  CHECK_THROWS_WITH(run_mpi(unknown, ctx, my_inputs(unknown)),
                    Contains("unknown process group 'ep'"));
  CHECK(ctx.pending() == 0);
}

TEST_CASE("a mesh that does not match the MPI world says how many processes it needs", "[flat]") {
  const int w = world();
  CHECK_THROWS_WITH(ProcessGroups(Mesh{2, w}),
                    Contains("2x" + std::to_string(w) + " mesh (replicas x shards) needs " +
                             std::to_string(2 * w) + " processes, mpirun started " +
                             std::to_string(w)));
  CHECK_THROWS_WITH(ProcessGroups(flat_mesh(w + 1)),
                    Contains("needs " + std::to_string(w + 1) + " processes"));
}

// Three collectives in flight at once, waited in the reverse order.
TEST_CASE("collectives in flight together complete in any wait order", "[flat]") {
  const Mesh mesh = flat_mesh(world());
  const int64_t w = world();
  Trace t;
  TraceBuilder tb(t);
  tb.add_arg(arg("x", tensor({2 * w, 3}, DType::f64)));
  const Attrs dp{{"group", "dp"}, {"size", w}};
  Attrs sum = dp, gather = dp;
  sum.set("op", "sum");
  gather.set("dim", int64_t{0});
  Attrs scatter = sum;
  scatter.set("dim", int64_t{0});
  const Proxy a = tb.emit1(OpId::AllReduce, {Operand::of("x")}, sum);
  const Proxy g = tb.emit1(OpId::AllGather, {Operand::of("x")}, gather);
  const Proxy s = tb.emit1(OpId::ReduceScatter, {Operand::of("x")}, scatter);
  const Proxy ws = tb.emit1(OpId::Wait, {Operand::of(s.name)});
  const Proxy wg = tb.emit1(OpId::Wait, {Operand::of(g.name)});
  const Proxy wa = tb.emit1(OpId::Wait, {Operand::of(a.name)});
  t.returns = ReturnTree::tuple(
      {ReturnTree::leaf(wa.name), ReturnTree::leaf(wg.name), ReturnTree::leaf(ws.name)});
  MpiContext ctx(mesh);
  check_against_reference(t, mesh, ctx);
  check_against_reference(t, mesh, ctx, /*alias_waits=*/true);
}

// The runtime may run an all_reduce in place and give a wait its future's
// buffer; MPI forbids aliased send and receive buffers, so the kernel must
// notice.
TEST_CASE("an in-place all_reduce and a wait into the future's buffer", "[flat]") {
  MpiContext ctx(flat_mesh(world()));
  const int64_t w = world();
  const Trace t = collective_trace(OpId::AllReduce, tensor({6}, DType::i64),
                                   {{"group", "dp"}, {"size", w}, {"op", "sum"}});
  const BoundSymbol& start = t.bsyms[0];
  const BoundSymbol& finish = t.bsyms[1];
  std::vector<int64_t> buf(6);
  for (int i = 0; i < 6; ++i) buf[i] = 10 * me() + i;
  const TensorType& future = start.output().type;
  const TensorType& value = finish.output().type;
  mpi_executor().kernel(start.op)(ctx, start, {{buf.data(), &t.args[0].type}}, {{buf.data(), &future}});
  mpi_executor().kernel(finish.op)(ctx, finish, {{buf.data(), &future}}, {{buf.data(), &value}});
  for (int i = 0; i < 6; ++i) CHECK(buf[i] == 10 * w * (w - 1) / 2 + w * i);
}

// Open MPI advances a non-blocking collective only inside MPI calls: calling
// progress() between pieces of compute must finish it before the wait.
TEST_CASE("progress() completes an all_reduce while the rank computes", "[flat]") {
  MpiContext ctx(flat_mesh(world()));
  const int64_t w = world(), n = int64_t{1} << 20;  // 4 MiB: several rounds of the schedule
  const Trace t = collective_trace(OpId::AllReduce, tensor({n}, DType::f32),
                                   {{"group", "dp"}, {"size", w}, {"op", "sum"}});
  std::vector<float> x(n, static_cast<float>(me() + 1)), y(n, 0.0f);
  const BoundSymbol& start = t.bsyms[0];
  const BoundSymbol& finish = t.bsyms[1];
  mpi_executor().kernel(start.op)(ctx, start, {{x.data(), &t.args[0].type}},
                                  {{y.data(), &start.output().type}});
  CHECK(ctx.pending() == 1);
  volatile double sink = 0;  // dummy compute between progress calls
  size_t open = 1;
  int rounds = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (open > 0 && std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 10000; ++i) sink = sink + i * 0.5;
    open = ctx.progress();
    ++rounds;
  }
  INFO("rank " << me() << " after " << rounds << " progress rounds");
  CHECK(open == 0);
  CHECK(ctx.pending() == 1);  // complete, but still waiting for its wait
  mpi_executor().kernel(finish.op)(ctx, finish, {{y.data(), &start.output().type}},
                                   {{y.data(), &finish.output().type}});
  CHECK(ctx.pending() == 0);
  const float want = static_cast<float>(w * (w + 1) / 2);
  CHECK(y.front() == want);
  CHECK(y.back() == want);
}

// Thread mode (FSDPC_MPI_PROGRESS=thread): the progress thread calls MPI only
// once the rank's thread has made no progress call for a pause (a long
// kernel), not while it tests its collectives between short kernels; in poll
// mode there is no thread. Driven through the hooks the executor calls, with
// a collective "pending" for the whole case. The bounds follow from what this
// rank's thread actually did, not from wall-clock hopes: when other processes
// take its core for a while, the gap between two of its polls is a long
// kernel to the progress thread, which may then probe once per pause.
TEST_CASE("the progress thread calls MPI only while the rank's thread does not", "[flat]") {
  using Clock = std::chrono::steady_clock;
  constexpr auto kPause = std::chrono::microseconds(500);  // mpi_world.cpp's kProgressPause
  const uint64_t before = mpi_progress_probes();
  if (mpi_progress() == MpiProgress::poll) {
    CHECK(before == 0);
    return;
  }
  volatile double sink = 0;
  auto short_kernel = [&] {
    for (int i = 0; i < 2000; ++i) sink = sink + i * 0.5;  // a few microseconds
  };
  // Probes the thread may make in a gap of `gap` without a poll: one per
  // pause after the first pause, plus one it decided on just before the poll
  // that ended the gap; half a pause of margin for the time our clock reads
  // and the poll itself take, which the gap as measured here leaves out.
  auto allowed_in = [&](Clock::duration gap) -> uint64_t {
    gap += kPause / 2;
    return gap < kPause ? 0 : static_cast<uint64_t>(gap / kPause) + 1;
  };
  mpi_progress_started();
  uint64_t allowed = 0;
  Clock::duration longest_gap{0};
  {
    const Clock::time_point end = Clock::now() + std::chrono::milliseconds(100);
    Clock::time_point last = Clock::now();
    for (;;) {
      short_kernel();
      const Clock::time_point now = Clock::now();
      allowed += allowed_in(now - last);
      longest_gap = std::max(longest_gap, now - last);
      if (now >= end) break;
      mpi_progress_polled();
      last = Clock::now();
    }
  }
  const uint64_t while_polling = mpi_progress_probes() - before;
  // Long kernels: no poll until the thread has probed a few times (it may
  // itself be kept off the core for a while), then the rate is checked.
  const Clock::time_point computing = Clock::now();
  while (mpi_progress_probes() - before - while_polling < 3 && Clock::now() - computing < std::chrono::seconds(20))
    short_kernel();
  const Clock::duration computed = Clock::now() - computing;
  const uint64_t while_computing = mpi_progress_probes() - before - while_polling;
  mpi_progress_completed();
  INFO("rank " << me() << ": " << while_polling << " probes in 100 ms of polling (longest gap between polls "
               << std::chrono::duration_cast<std::chrono::microseconds>(longest_gap).count() << " us, " << allowed
               << " probes allowed by the gaps), " << while_computing << " in "
               << std::chrono::duration_cast<std::chrono::microseconds>(computed).count()
               << " us without an MPI call (one per 500 us at most)");
  CHECK(while_polling <= allowed + 1);
  CHECK(while_computing >= 3);
  CHECK(while_computing <= allowed_in(computed) + 1);
}

TEST_CASE("the mpi executor claims CPU collectives it can run", "[flat]") {
  const Executor& mpi = mpi_executor();
  CHECK(mpi.name() == "mpi");
  auto first = [](OpId op, DType d, Attrs attrs) {
    return collective_trace(op, tensor({4, 2}, d), std::move(attrs)).bsyms;
  };
  const Attrs sum{{"group", "dp"}, {"size", int64_t{2}}, {"op", "sum"}};
  const auto reduce_f32 = first(OpId::AllReduce, DType::f32, sum);
  CHECK(mpi.claims(reduce_f32[0]));
  CHECK(mpi.claims(reduce_f32[1]));  // its wait
  CHECK_FALSE(mpi.claims(first(OpId::AllReduce, DType::bf16, sum)[0]));
  CHECK(mpi.claims(first(OpId::AllGather, DType::bf16,
                         {{"group", "dp"}, {"size", int64_t{2}}, {"dim", int64_t{0}}})[0]));
  BoundSymbol on_gpu = reduce_f32[0];
  on_gpu.outputs[0].type.device = Device{DeviceKind::cuda, 0};
  CHECK_FALSE(mpi.claims(on_gpu));
  BoundSymbol not_a_collective;
  not_a_collective.op = OpId::Neg;
  not_a_collective.outputs.push_back(reduce_f32[1].outputs[0]);
  CHECK_FALSE(mpi.claims(not_a_collective));
}

}  // namespace
}  // namespace fsdpc
