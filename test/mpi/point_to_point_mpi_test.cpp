// The MPI executor's send and recv against the reference executor's Mailbox,
// under mpirun -np 2 on a flat mesh (group dp): rank 0 sends, rank 1
// receives and sends back, rank 0 receives; then FIFO order, completion by
// progress(), and a recv whose byte count differs from its send.
//
// The ranks run different traces, but every MPI call has its partner on the
// other rank, so checks after a call use CHECK (never REQUIRE): a failure on
// one rank must not send it down another path while the other waits for it.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <vector>

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

int me() { return mpi_world_rank(); }
int other() { return 1 - me(); }

TensorType tensor(Shape shape, DType d) {
  TensorType t;
  t.shape = std::move(shape);
  t.dtype = d;
  return t;
}

Attrs dp_peer(int peer) { return Attrs{{"group", "dp"}, {"size", int64_t{2}}, {"peer", int64_t{peer}}}; }

Attrs recv_attrs(int peer, const TensorType& t) {
  Attrs a = dp_peer(peer);
  a.set("shape", IntList(t.shape.begin(), t.shape.end()));
  a.set("dtype", std::string(dtype_name(t.dtype)));
  a.set("device", "cpu");
  return a;
}

// Sends each argument to `peer` in order; returns the waited sends.
Trace sender(const std::vector<TensorType>& types, int peer) {
  Trace t;
  TraceBuilder b(t);
  std::vector<ReturnTree> out;
  for (size_t i = 0; i < types.size(); ++i) {
    const std::string x = "x" + std::to_string(i);
    b.add_arg(Proxy{x, types[i], "", false});
    const Proxy f = b.emit1(OpId::Send, {Operand::of(x)}, dp_peer(peer));
    out.push_back(ReturnTree::leaf(b.emit1(OpId::Wait, {Operand::of(f.name)}).name));
  }
  t.returns = ReturnTree::tuple(std::move(out));
  return t;
}

// Receives one message of each type from `peer`, in order, and with
// `echo` sends each straight back.
Trace receiver(const std::vector<TensorType>& types, int peer, bool echo) {
  Trace t;
  TraceBuilder b(t);
  std::vector<ReturnTree> out;
  std::vector<std::string> got;
  for (const TensorType& type : types) {
    const Proxy f = b.emit1(OpId::Recv, {}, recv_attrs(peer, type));
    got.push_back(b.emit1(OpId::Wait, {Operand::of(f.name)}).name);
    out.push_back(ReturnTree::leaf(got.back()));
  }
  for (size_t i = 0; echo && i < got.size(); ++i) {
    const Proxy f = b.emit1(OpId::Send, {Operand::of(got[i])}, dp_peer(peer));
    b.emit1(OpId::Wait, {Operand::of(f.name)});  // the value is got[i]'s, returned already
  }
  t.returns = ReturnTree::tuple(std::move(out));
  return t;
}

// Rank 0's values: distinct small integers, exact in every dtype.
Data input(const TensorType& t, int salt) {
  Data v(numel(t.shape));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = t.dtype == DType::boolean ? double((i + salt) % 2) : 100.0 * salt + double(i) - 3;
  return v;
}

std::vector<Data> inputs(const std::vector<TensorType>& types) {
  std::vector<Data> v;
  for (size_t i = 0; i < types.size(); ++i) v.push_back(input(types[i], int(i) + 1));
  return v;
}

std::vector<reference::Value> values(const std::vector<TensorType>& types) {
  std::vector<reference::Value> v;
  const std::vector<Data> d = inputs(types);
  for (size_t i = 0; i < types.size(); ++i) v.push_back(reference::make_value(types[i], d[i]));
  return v;
}

std::vector<Data> data_of(const std::vector<reference::Value>& v) {
  std::vector<Data> d;
  for (const reference::Value& x : v) d.push_back(x.data);
  return d;
}

// ---- Cases -----------------------------------------------------------------

bool two_ranks() {
  if (mpi_world_size() == 2) return true;
  WARN("skipped: send and recv need mpirun -np 2, this job has " << mpi_world_size() << " ranks");
  return false;
}

// Rank 0 sends three messages (FIFO: f32, then i64, then bool, matched in
// that order), rank 1 receives and echoes them, rank 0 receives the echo.
// The reference runs the same three traces as stages of a world of one each
// (positions 0, 1, 0), and every rank checks its own part exactly.
TEST_CASE("send and recv between two ranks match the reference's Mailbox", "[p2p]") {
  if (!two_ranks()) return;
  const std::vector<TensorType> types = {tensor({2, 3}, DType::f32), tensor({4}, DType::i64),
                                         tensor({5}, DType::boolean)};
  const Trace forward = sender(types, 1), middle = receiver(types, 0, true), back = receiver(types, 1, false);

  reference::Mailbox mail;
  const Mesh one = flat_mesh(1);
  const auto want0 = reference::run_spmd(forward, one, {values(types)}, &mail);
  mail.position = 1;
  const auto want1 = reference::run_spmd(middle, one, {{}}, &mail);
  mail.position = 0;
  const auto want_back = reference::run_spmd(back, one, {{}}, &mail);
  REQUIRE(data_of(want_back[0]) == inputs(types));  // the reference itself round-trips

  MpiContext ctx(flat_mesh(2));
  if (me() == 0) {
    CHECK(run_mpi(forward, ctx, inputs(types)) == data_of(want0[0]));
    CHECK(run_mpi(back, ctx, {}) == data_of(want_back[0]));
  } else {
    CHECK(run_mpi(middle, ctx, {}) == data_of(want1[0]));
  }
  CHECK(ctx.pending() == 0);
}

// A recv completed by progress() between kernels, before its wait.
TEST_CASE("progress() completes a recv before its wait", "[p2p]") {
  if (!two_ranks()) return;
  const TensorType t = tensor({1 << 16}, DType::f32);
  MpiContext ctx(flat_mesh(2));
  if (me() == 0) {
    CHECK(run_mpi(sender({t}, 1), ctx, {input(t, 7)}).at(0) == input(t, 7));
    return;
  }
  const Trace r = receiver({t}, 0, false);
  std::vector<float> buf(numel(t.shape), -1.0f);
  const TensorType& future = r.bsyms[0].output().type;
  mpi_executor().kernel(OpId::Recv)(ctx, r.bsyms[0], {}, {{buf.data(), &future}});
  size_t open = 1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (open > 0 && std::chrono::steady_clock::now() < deadline) open = ctx.progress();
  CHECK(open == 0);
  CHECK(ctx.pending() == 1);  // complete, still waiting for its wait
  mpi_executor().kernel(OpId::Wait)(ctx, r.bsyms[1], {{buf.data(), &future}},
                                    {{buf.data(), &r.bsyms[1].output().type}});
  CHECK(ctx.pending() == 0);
  CHECK(buf.front() == float(input(t, 7).front()));
  CHECK(buf.back() == float(input(t, 7).back()));
}

// A watch that never expires, so waits take mpi_wait_watched's MPI_Test loop.
class PatientWatch final : public CollectiveWatch {
 public:
  uint64_t issued(const CollectiveInfo&) override { return ++n_; }
  void completed(uint64_t) override {}
  void waiting() override {}
  [[noreturn]] void expired(uint64_t id, double) override { FSDPC_CHECK(false) << "collective " << id << " expired"; }
  double timeout_s() const override { return 60; }

 private:
  uint64_t n_ = 0;
};

// Rank 0 sends f32[4], then f32[2]; rank 1 expects f32[3] both times: a
// longer message and a shorter one are both the traces' mistake, reported
// by the recv's wait with both sizes, and the next message still arrives in
// order. Each way of matching a recv is tried: the wait's MPI_Mprobe,
// progress() (MPI_Improbe), and the watched MPI_Improbe loop.
TEST_CASE("a recv whose send has another size is an fsdpc::Error at its wait", "[p2p]") {
  if (!two_ranks()) return;
  enum Way { wait, poll, watched };
  for (Way way : {wait, poll, watched}) {
    INFO("rank " << me() << ", matched by " << (way == wait ? "the wait" : way == poll ? "progress()" : "the watch"));
    PatientWatch watch;
    if (way == watched) set_collective_watch(&watch);
    MpiContext ctx(flat_mesh(2));
    const TensorType four = tensor({4}, DType::f32), two = tensor({2}, DType::f32), three = tensor({3}, DType::f32);
    if (me() == 0) {
      run_mpi(sender({four, two, three}, 1), ctx, {input(four, 1), input(two, 2), input(three, 3)});
    } else {
      const Trace r = receiver({three}, 0, false);
      auto receive = [&] {
        if (way != poll) return run_mpi(r, ctx, {});
        std::vector<float> buf(3);
        const TensorType& future = r.bsyms[0].output().type;
        mpi_executor().kernel(OpId::Recv)(ctx, r.bsyms[0], {}, {{buf.data(), &future}});
        while (ctx.progress() > 0) {
        }
        mpi_executor().kernel(OpId::Wait)(ctx, r.bsyms[1], {{buf.data(), &future}},
                                          {{buf.data(), &r.bsyms[1].output().type}});
        return std::vector<Data>{Data(buf.begin(), buf.end())};
      };
      CHECK_THROWS_WITH(receive(), Contains("recv ft0 (waited by t1): the message from peer 0 has 16 bytes, but the "
                                            "recv expects 12 (cpu f32[3]); the matching send's input has another "
                                            "type"));
      CHECK_THROWS_WITH(receive(), Contains("the message from peer 0 has 8 bytes, but the recv expects 12"));
      CHECK(receive().at(0) == input(three, 3));
    }
    CHECK(ctx.pending() == 0);
    set_collective_watch(nullptr);
  }
}

// Past Open MPI's eager limit a message goes by rendezvous; a recv too short
// for it still fails only at its wait, and the send completes.
TEST_CASE("a long message into a shorter recv fails at the wait, not in MPI", "[p2p]") {
  if (!two_ranks()) return;
  MpiContext ctx(flat_mesh(2));
  const TensorType big = tensor({1 << 20}, DType::f32), half = tensor({1 << 19}, DType::f32);
  if (me() == 0) {
    CHECK(run_mpi(sender({big, half}, 1), ctx, {input(big, 1), input(half, 2)}).at(1) == input(half, 2));
  } else {
    CHECK_THROWS_WITH(run_mpi(receiver({half}, 0, false), ctx, {}),
                      Contains("has 4194304 bytes, but the recv expects 2097152 (cpu f32[524288])"));
    CHECK(run_mpi(receiver({half}, 0, false), ctx, {}).at(0) == input(half, 2));
  }
  CHECK(ctx.pending() == 0);
}

// Two recvs from one peer, waited newest first: the older still gets the
// first message (FIFO), whichever wait matches it.
TEST_CASE("recvs waited out of order still match messages in program order", "[p2p]") {
  if (!two_ranks()) return;
  MpiContext ctx(flat_mesh(2));
  const TensorType two = tensor({2}, DType::i64), three = tensor({3}, DType::i64);
  if (me() == 0) {
    run_mpi(sender({two, three}, 1), ctx, {input(two, 1), input(three, 2)});
  } else {
    Trace t;
    TraceBuilder b(t);
    const Proxy first = b.emit1(OpId::Recv, {}, recv_attrs(0, two));
    const Proxy second = b.emit1(OpId::Recv, {}, recv_attrs(0, three));
    const Proxy got2 = b.emit1(OpId::Wait, {Operand::of(second.name)});
    const Proxy got1 = b.emit1(OpId::Wait, {Operand::of(first.name)});
    t.returns = ReturnTree::tuple({ReturnTree::leaf(got1.name), ReturnTree::leaf(got2.name)});
    CHECK(run_mpi(t, ctx, {}) == std::vector<Data>{input(two, 1), input(three, 2)});
  }
  CHECK(ctx.pending() == 0);
}

TEST_CASE("a send or recv to this rank itself, or with the wrong size, fails before MPI", "[p2p]") {
  if (!two_ranks()) return;
  MpiContext ctx(flat_mesh(2));
  const TensorType t = tensor({3}, DType::f32);
  CHECK_THROWS_WITH(run_mpi(sender({t}, me()), ctx, {input(t, 1)}),
                    Contains("send -> ft0: peer " + std::to_string(me()) + " is this rank's own position in group 'dp'"));
  CHECK_THROWS_WITH(run_mpi(receiver({t}, me(), false), ctx, {}),
                    Contains("recv -> ft0: peer " + std::to_string(me()) + " is this rank's own position"));
  Trace wrong = sender({t}, other());
  wrong.bsyms[0].attrs.set("size", int64_t{3});
  wrong.bsyms[0].attrs.set("peer", int64_t{2});
  CHECK_THROWS_WITH(run_mpi(wrong, ctx, {input(t, 1)}),
                    Contains("send -> ft0: group 'dp' has 2 ranks") && Contains("the trace says size=3"));
  CHECK(ctx.pending() == 0);
}

// A send's wait does not wait for its receive (PendingCollective::buffered):
// both ranks send first, a message past Open MPI's eager limit that goes by
// rendezvous, and only then receive. Were the wait to block until the peer
// received, each rank would wait for the other (the 1F1B pipeline schedule
// does exactly this between neighbouring stages) and the test would hang.
TEST_CASE("both ranks can send a large message first and receive after", "[p2p]") {
  if (!two_ranks()) return;
  MpiContext ctx(flat_mesh(2));
  const TensorType big = tensor({1 << 20}, DType::f32);
  CHECK(run_mpi(sender({big}, other()), ctx, {input(big, 10 + me())}).at(0) == input(big, 10 + me()));
  CHECK(ctx.sends_in_flight() <= 1);
  CHECK(run_mpi(receiver({big}, other(), false), ctx, {}).at(0) == input(big, 10 + other()));
  ctx.complete_all();
  CHECK(ctx.sends_in_flight() == 0);
  CHECK(ctx.pending() == 0);
}

}  // namespace
}  // namespace fsdpc
