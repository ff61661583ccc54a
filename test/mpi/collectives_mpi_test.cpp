// The MPI executor against the reference executor's simulated collectives:
// each rank runs a tiny trace through the MPI kernels and compares its result
// with what run_spmd computes for it. Run under mpirun with 1 to 4 ranks.
//
// Every rank must make the same MPI calls in the same order, so checks after
// a collective use CHECK (never REQUIRE): a failure on one rank must not send
// it down another path while the others wait for it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "executors/bf16.h"
#include "executors/comm/mpi_check.h"
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
  auto with_dim = [](Attrs a) {
    a.set("dim", int64_t{0});
    return a;
  };
  const auto reduce_f32 = first(OpId::AllReduce, DType::f32, sum);
  CHECK(mpi.claims(reduce_f32[0]));
  CHECK(mpi.claims(reduce_f32[1]));  // its wait
  CHECK(mpi.claims(first(OpId::AllReduce, DType::bf16, sum)[0]));
  CHECK(mpi.claims(first(OpId::ReduceScatter, DType::bf16, with_dim(sum))[0]));
  CHECK(mpi.claims(first(OpId::AllReduce, DType::f16, sum)[0]));
  CHECK_FALSE(mpi.claims(first(OpId::AllReduce, DType::boolean, sum)[0]));
  BoundSymbol scatter_max = first(OpId::ReduceScatter, DType::bf16, with_dim(sum))[0];
  scatter_max.attrs.set("op", "max");  // the trace builder refuses it; a hand-made trace might not
  CHECK_FALSE(mpi.claims(scatter_max));
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

// ---- bf16 and f16 reductions (executors/comm/mpi_reduce_ops.h) -------------
// MPI has no 2-byte float types: the executor reduces them with MPI_Ops of
// its own that combine two values in f32 and round once, in the binomial
// order mpi_reduce_ops.h documents. The expected bits are computed here from
// every rank's inputs (each rank can build all of them), in that order.

using Bits = std::vector<uint16_t>;

// A 2-byte float format as the test sees it.
struct Half {
  DType dtype;
  float (*widen)(uint16_t);
  uint16_t (*narrow)(float);  // to nearest even, NaN quiet
  int exponent_bias, mantissa_bits;
  uint16_t quiet() const { return static_cast<uint16_t>(1u << (mantissa_bits - 1)); }  // a quiet NaN's bit
};

const Half kBf16{DType::bf16, bf16_to_f32, f32_to_bf16, 127, 7};
#if defined(__FLT16_MANT_DIG__)
const Half kF16{DType::f16, [](uint16_t h) { return static_cast<float>(std::bit_cast<_Float16>(h)); },
                [](float f) { return std::bit_cast<uint16_t>(static_cast<_Float16>(f)); }, 15, 10};
#endif

uint16_t sum_in_f32(const Half& h, uint16_t a, uint16_t b) { return h.narrow(h.widen(a) + h.widen(b)); }

// NaN wins (the left one, quieted, when both are), +0 over -0.
uint16_t max_of(const Half& h, uint16_t a, uint16_t b) {
  const float x = h.widen(a), y = h.widen(b);
  if (std::isnan(x)) return a | h.quiet();
  if (std::isnan(y)) return b | h.quiet();
  if (x == 0 && y == 0) return std::signbit(x) ? b : a;
  return x >= y ? a : b;
}

// x[k] is the group's rank k's value: Open MPI's binomial tree, lower rank
// on the left: (x0 + x1) + (x2 + x3) on 4 ranks, (x0 + x1) + x2 on 3.
template <class Combine>
uint16_t tree(Bits x, Combine combine) {
  for (size_t step = 1; step < x.size(); step *= 2)
    for (size_t k = 0; k + step < x.size(); k += 2 * step) x[k] = combine(x[k], x[k + step]);
  return x[0];
}

// What a reduction of 2-byte floats could wrongly do, for checking that the
// inputs tell it apart from the right one: add left to right, add every
// rank in f32 and round once, add the bits as integers (MPI_SUM of
// MPI_UINT16_T), or round each f32 sum by truncation.
uint16_t left_to_right(const Half& h, const Bits& x) {
  uint16_t acc = x[0];
  for (size_t k = 1; k < x.size(); ++k) acc = sum_in_f32(h, acc, x[k]);
  return acc;
}
uint16_t rounded_once(const Half& h, const Bits& x) {
  float acc = 0;
  for (uint16_t v : x) acc += h.widen(v);
  return h.narrow(acc);
}
uint16_t integer_sum(const Bits& x) {
  uint16_t acc = 0;
  for (uint16_t v : x) acc = static_cast<uint16_t>(acc + v);
  return acc;
}
uint16_t truncated_tree(const Bits& x) {
  return tree(x, [](uint16_t a, uint16_t b) {
    return static_cast<uint16_t>(std::bit_cast<uint32_t>(bf16_to_f32(a) + bf16_to_f32(b)) >> 16);
  });
}

uint64_t mix(uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Rank r's element i: a value of either sign in [1/4, 8) with a random
// significand (so sums round, and one partial sum's rounding shows in the
// next), except for a few fixed cases at the front.
enum class Reduce { sum, max };
uint16_t input_bits(const Half& h, Reduce reduce, int r, int64_t i) {
  const auto bits = [&](bool negative, int exponent, uint32_t mantissa) {
    return static_cast<uint16_t>((negative ? 0x8000u : 0u) |
                                 (static_cast<uint32_t>(h.exponent_bias + exponent) << h.mantissa_bits) | mantissa);
  };
  const uint16_t one = bits(false, 0, 0);
  const uint16_t inf = static_cast<uint16_t>(((1u << (15 - h.mantissa_bits)) - 1) << h.mantissa_bits);
  const uint16_t signalling_nan = static_cast<uint16_t>(inf | 1u);
  const uint16_t half_ulp_of_one = bits(false, -h.mantissa_bits - 1, 0);
  const uint16_t largest = static_cast<uint16_t>(inf - 1);
  if (reduce == Reduce::sum) {
    switch (i) {
      // 1 + half an ulp rounds to even, back to 1, at every combination,
      // but two halves make a whole: 1 on 2 and 3 ranks (an f32 sum would
      // keep 1 + ulp on 3), 1 + ulp on 4 (left to right: 1; in f32: 1 + 2 ulp).
      case 0: return r == 0 ? one : half_ulp_of_one;
      case 1: return r == 0 ? inf : r == 1 ? static_cast<uint16_t>(inf | 0x8000u) : one;  // inf - inf: NaN
      case 2: return 0x8000;  // -0 + -0 = -0
      case 3: return largest;  // overflows to inf
      case 4: return r == 1 ? signalling_nan : one;  // comes out quiet, payload kept
      default: break;
    }
  } else {
    switch (i) {
      case 0: return r % 2 == 0 ? 0x8000 : 0;  // +0 wins over -0
      case 1: return r == 1 ? signalling_nan : one;  // NaN wins, quieted
      case 2: return static_cast<uint16_t>(inf | 0x8000u);
      case 3: return r == 0 ? inf : largest;
      default: break;
    }
  }
  const uint64_t z = mix(static_cast<uint64_t>(r) * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(i) + 1);
  const uint32_t mantissa = static_cast<uint32_t>(z >> 8) & ((1u << h.mantissa_bits) - 1);
  return bits((z & 1) != 0, static_cast<int>((z >> 1) % 5) - 2, mantissa);
}

Bits inputs_of(const Half& h, Reduce reduce, int r, int64_t n) {
  Bits x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = input_bits(h, reduce, r, i);
  return x;
}

// Element i of every rank, in rank order.
Bits across_ranks(const Half& h, Reduce reduce, int64_t i, int ranks) {
  Bits x(ranks);
  for (int r = 0; r < ranks; ++r) x[r] = input_bits(h, reduce, r, i);
  return x;
}

uint16_t expected(const Half& h, Reduce reduce, const Bits& x) {
  if (reduce == Reduce::max) return tree(x, [&](uint16_t a, uint16_t b) { return max_of(h, a, b); });
  return tree(x, [&](uint16_t a, uint16_t b) { return sum_in_f32(h, a, b); });
}

// Runs the two statements of collective_trace on raw 2-byte elements;
// `in_place` gives the collective its input's buffer as its output.
Bits run_bits(const Trace& t, MpiContext& ctx, Bits x, bool in_place = false) {
  const BoundSymbol& start = t.bsyms.at(0);
  const BoundSymbol& finish = t.bsyms.at(1);
  const TensorType& future = start.output().type;
  Bits y(static_cast<size_t>(numel(future.shape)));
  void* out = in_place ? x.data() : y.data();
  mpi_executor().kernel(start.op)(ctx, start, {{x.data(), &t.args[0].type}}, {{out, &future}});
  mpi_executor().kernel(finish.op)(ctx, finish, {{out, &future}}, {{out, &finish.output().type}});
  if (in_place) return x;
  return y;
}

// "" when equal, else where they first differ (the vectors can be long).
std::string difference(const Bits& got, const Bits& want) {
  auto hex = [](uint16_t v) {
    char text[8];
    std::snprintf(text, sizeof text, "0x%04x", v);
    return std::string(text);
  };
  if (got.size() != want.size())
    return std::to_string(got.size()) + " elements, expected " + std::to_string(want.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) return "element " + std::to_string(i) + " is " + hex(got[i]) + ", expected " + hex(want[i]);
  return "";
}

// Whether every rank of the world holds the same `bits`.
bool same_everywhere(const Bits& bits) {
  Bits all(bits.size() * world());
  FSDPC_MPI_CHECK(MPI_Allgather(bits.data(), static_cast<int>(bits.size()), MPI_UINT16_T, all.data(),
                                static_cast<int>(bits.size()), MPI_UINT16_T, MPI_COMM_WORLD));
  for (int r = 0; r < world(); ++r)
    if (!std::equal(bits.begin(), bits.end(), all.begin() + r * bits.size())) return false;
  return true;
}

// The inputs tell the documented order apart from the wrong ones (a check of
// the test's values, made alike on every rank).
void check_inputs_discriminate(const Half& h, int64_t n) {
  const int w = world();
  int differ_from_integers = 0, differ_from_truncation = 0, differ_from_rounded_once = 0, differ_from_sequence = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Bits x = across_ranks(h, Reduce::sum, i, w);
    const uint16_t want = expected(h, Reduce::sum, x);
    differ_from_integers += want != integer_sum(x);
    differ_from_truncation += h.dtype == DType::bf16 && want != truncated_tree(x);
    differ_from_rounded_once += want != rounded_once(h, x);
    differ_from_sequence += want != left_to_right(h, x);
  }
  INFO(dtype_name(h.dtype) << " on " << w << " ranks");
  if (w >= 2) CHECK(differ_from_integers > n / 2);
  if (w >= 2 && h.dtype == DType::bf16) CHECK(differ_from_truncation > 0);
  if (w >= 3) CHECK(differ_from_rounded_once > 0);
  if (w >= 4) CHECK(differ_from_sequence > 0);
  if (w == 4)  // case 0 of input_bits: 1 + ulp
    CHECK(expected(h, Reduce::sum, across_ranks(h, Reduce::sum, 0, w)) ==
          h.narrow(1.0f + std::ldexp(1.0f, -h.mantissa_bits)));
}

std::vector<Half> halves() {
#if defined(__FLT16_MANT_DIG__)
  return {kBf16, kF16};
#else
  return {kBf16};
#endif
}

TEST_CASE("bf16 and f16 all_reduce: f32 pairwise sums rounded once, in the documented order", "[flat]") {
  const Mesh mesh = flat_mesh(world());
  MpiContext ctx(mesh);
  const int64_t w = world();
  for (const Half& h : halves()) {
    // 37 elements, and 40000 (80 KB: a commutative op would get another
    // algorithm on 4 ranks).
    for (int64_t n : {int64_t{37}, int64_t{40000}}) {
      check_inputs_discriminate(h, n);
      for (Reduce reduce : {Reduce::sum, Reduce::max}) {
        for (bool in_place : {false, true}) {
          INFO("rank " << me() << " of " << w << ", " << dtype_name(h.dtype) << "[" << n << "] "
                       << (reduce == Reduce::sum ? "sum" : "max") << (in_place ? ", in place" : ""));
          Attrs attrs{{"group", "dp"}, {"size", w}, {"op", "sum"}};
          if (reduce == Reduce::max) {
            attrs.set("op", "max");
            attrs.set("grad", "none");
          }
          const Trace t = collective_trace(OpId::AllReduce, tensor({n}, h.dtype), std::move(attrs));
          const Bits got = run_bits(t, ctx, inputs_of(h, reduce, me(), n), in_place);
          Bits want(n);
          for (int64_t i = 0; i < n; ++i) want[i] = expected(h, reduce, across_ranks(h, reduce, i, w));
          CHECK(difference(got, want) == "");
          CHECK(same_everywhere(got));
          CHECK(ctx.pending() == 0);
        }
      }
    }
  }
}

TEST_CASE("bf16 and f16 reduce_scatter: each rank's block of the documented sum", "[flat]") {
  const Mesh mesh = flat_mesh(world());
  MpiContext ctx(mesh);
  const int w = world();
  for (const Half& h : halves()) {
    // Along dim 0: rank m keeps elements [m * block, (m + 1) * block).
    for (int64_t block : {int64_t{13}, int64_t{20000}}) {
      INFO("rank " << me() << " of " << w << ", " << dtype_name(h.dtype) << ", blocks of " << block);
      const int64_t n = block * w;
      check_inputs_discriminate(h, n);
      const Trace t = collective_trace(OpId::ReduceScatter, tensor({n}, h.dtype),
                                       {{"group", "dp"}, {"size", int64_t{w}}, {"dim", int64_t{0}}, {"op", "sum"}});
      const Bits got = run_bits(t, ctx, inputs_of(h, Reduce::sum, me(), n));
      Bits want(block);
      for (int64_t j = 0; j < block; ++j)
        want[j] = expected(h, Reduce::sum, across_ranks(h, Reduce::sum, me() * block + j, w));
      CHECK(difference(got, want) == "");
    }
    // Along dim 1 of [3, 4w]: rank m keeps columns [4m, 4m + 4) of every row.
    INFO("rank " << me() << " of " << w << ", " << dtype_name(h.dtype) << ", along dim 1");
    const int64_t cols = 4 * w;
    const Trace t = collective_trace(OpId::ReduceScatter, tensor({3, cols}, h.dtype),
                                     {{"group", "dp"}, {"size", int64_t{w}}, {"dim", int64_t{1}}, {"op", "sum"}});
    const Bits got = run_bits(t, ctx, inputs_of(h, Reduce::sum, me(), 3 * cols));
    Bits want;
    for (int64_t row = 0; row < 3; ++row)
      for (int64_t c = 0; c < 4; ++c)
        want.push_back(expected(h, Reduce::sum, across_ranks(h, Reduce::sum, row * cols + 4 * me() + c, w)));
    CHECK(difference(got, want) == "");
    CHECK(ctx.pending() == 0);
  }
}

TEST_CASE("bf16 all_gather moves 2-byte elements as they are", "[flat]") {
  const Mesh mesh = flat_mesh(world());
  MpiContext ctx(mesh);
  const int64_t w = world();
  // Along dim 0, concatenated; along dim 1 of [3, 2], interleaved per row.
  for (int64_t dim : {0, 1}) {
    INFO("rank " << me() << " of " << w << ", dim " << dim);
    const Trace t = collective_trace(OpId::AllGather, tensor({3, 2}, DType::bf16),
                                     {{"group", "dp"}, {"size", w}, {"dim", dim}});
    const Bits got = run_bits(t, ctx, inputs_of(kBf16, Reduce::sum, me(), 6));
    Bits want;
    if (dim == 0) {
      for (int r = 0; r < w; ++r)
        for (uint16_t v : inputs_of(kBf16, Reduce::sum, r, 6)) want.push_back(v);
    } else {
      for (int64_t row = 0; row < 3; ++row)
        for (int r = 0; r < w; ++r)
          for (int64_t c = 0; c < 2; ++c) want.push_back(inputs_of(kBf16, Reduce::sum, r, 6)[row * 2 + c]);
    }
    CHECK(difference(got, want) == "");
    CHECK(same_everywhere(got));
  }
  CHECK(ctx.pending() == 0);
}

// Every rank runs the same trace and throws before any MPI call. The trace
// builder already refuses an op other than sum (or max), so that case is a
// statement changed after it was built, as a hand-made trace could be.
TEST_CASE("a reduction MPI cannot run is a user error that says what and where", "[flat]") {
  MpiContext ctx(flat_mesh(world()));
  const int64_t w = world();
  auto start = [&](OpId op, DType d, Attrs attrs, const char* then_op = nullptr) {
    Trace t = collective_trace(op, tensor({4 * w}, d), std::move(attrs));
    if (then_op) t.bsyms[0].attrs.set("op", then_op);
    std::vector<std::byte> x(static_cast<size_t>(4 * w * dtype_size(d))), y(x.size());
    mpi_executor().kernel(op)(ctx, t.bsyms[0], {{x.data(), &t.args[0].type}},
                              {{y.data(), &t.bsyms[0].output().type}});
  };
  const Attrs sum{{"group", "dp"}, {"size", w}, {"op", "sum"}};
  Attrs scatter = sum;
  scatter.set("dim", int64_t{0});
  CHECK_THROWS_AS(start(OpId::AllReduce, DType::boolean, sum), Error);
  CHECK_THROWS_WITH(start(OpId::AllReduce, DType::boolean, sum),
                    Contains("all_reduce -> ") && Contains("MPI cannot reduce bool") &&
                        Contains("cpu bool[" + std::to_string(4 * w) + "]") && Contains("f32, f64, i64, i32, bf16"));
  CHECK_THROWS_WITH(start(OpId::ReduceScatter, DType::boolean, scatter),
                    Contains("reduce_scatter -> ") && Contains("MPI cannot reduce bool"));
  CHECK_THROWS_WITH(start(OpId::AllReduce, DType::bf16, sum, "min"),
                    Contains("all_reduce -> ") && Contains("op=min on cpu bf16") &&
                        Contains("all-reduces with op=sum or op=max"));
  CHECK_THROWS_WITH(start(OpId::ReduceScatter, DType::f32, scatter, "max"),
                    Contains("reduce_scatter -> ") && Contains("op=max") && Contains("reduce-scatters with op=sum"));
  CHECK(ctx.pending() == 0);
}

}  // namespace
}  // namespace fsdpc
