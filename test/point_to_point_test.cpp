// send and recv, the point-to-point ops of pipeline stages: their meta rules
// and errors, their text and JSON forms, the verifier's future rules, the
// missing VJP, and the reference executor's Mailbox between the SPMD runs of
// different stages' traces (exact values per rank, FIFO order, every error).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "executors/claim.h"
#include "executors/comm/mpi_executor.h"
#include "executors/cpu/cpu_executor.h"
#include "executors/reference/reference.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "ir/json.h"
#include "ir/meta.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/vjp_rules.h"

using namespace fsdpc;
using namespace fsdpc::reference;
using Catch::Contains;
using Data = std::vector<double>;

namespace {

TensorType tt(Shape shape, DType dtype = DType::f32) {
  TensorType t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  return t;
}

Attrs peer_attrs(int64_t peer, int64_t size = 2) {
  return Attrs{{"group", "pp"}, {"size", size}, {"peer", peer}};
}

Attrs recv_attrs(int64_t peer, Shape shape, const std::string& dtype = "f32") {
  Attrs a = peer_attrs(peer);
  a.set("shape", IntList(shape.begin(), shape.end()));
  a.set("dtype", dtype);
  a.set("device", "cpu");
  return a;
}

// The send's input as the meta functions see it.
const OperandType kX = OperandType::of(tt({2, 3}));

// send(x) to `peer` and its wait; returns the waited value's name.
std::string send(TraceBuilder& b, const std::string& x, int64_t peer) {
  const Proxy f = b.emit1(OpId::Send, {Operand::of(x)}, peer_attrs(peer));
  return b.emit1(OpId::Wait, {Operand::of(f.name)}).name;
}

std::string recv(TraceBuilder& b, int64_t peer, Shape shape, const std::string& dtype = "f32") {
  const Proxy f = b.emit1(OpId::Recv, {}, recv_attrs(peer, std::move(shape), dtype));
  return b.emit1(OpId::Wait, {Operand::of(f.name)}).name;
}

void returns(Trace& t, const std::vector<std::string>& names) {
  std::vector<ReturnTree> leaves;
  for (const std::string& n : names) leaves.push_back(ReturnTree::leaf(n));
  t.returns = ReturnTree::tuple(std::move(leaves));
}

// Stage 0's forward: x -> y = 2x, sent to stage 1 (and returned, as the
// sender keeps it).
Trace stage0_forward() {
  Trace t;
  t.name = "forward";
  TraceBuilder b(t);
  b.add_arg(Proxy{"x", tt({2, 3}), "", true});
  const Proxy y = b.emit1(OpId::Mul, {Operand::of("x"), Operand::lit(2.0)});
  returns(t, {send(b, y.name, 1)});
  return t;
}

// Stage 1: receives a, computes c = a + w, sends c back to stage 0.
Trace stage1() {
  Trace t;
  t.name = "forward";
  TraceBuilder b(t);
  b.add_arg(Proxy{"w", tt({2, 3}), "", true});
  const std::string a = recv(b, 0, {2, 3});
  const Proxy c = b.emit1(OpId::Add, {Operand::of(a), Operand::of("w")});
  returns(t, {a, send(b, c.name, 0)});
  return t;
}

// Stage 0's backward: receives what stage 1 sent back.
Trace stage0_backward() {
  Trace t;
  t.name = "backward";
  TraceBuilder b(t);
  returns(t, {recv(b, 1, {2, 3})});
  return t;
}

Value value(Data d, Shape shape = {2, 3}) { return make_value(tt(std::move(shape)), std::move(d)); }

// One argument list per rank of a 2-rank mesh.
std::vector<std::vector<Value>> per_rank(Value r0, Value r1) { return {{std::move(r0)}, {std::move(r1)}}; }

const Data kX0{1, 2, 3, 4, 5, 6}, kX1{-1, -2, -3, -4, -5, -6};
const Data kW0{10, 20, 30, 40, 50, 60}, kW1{100, 200, 300, 400, 500, 600};

Data twice(const Data& x) {
  Data d = x;
  for (double& v : d) v *= 2;
  return d;
}

Data plus(const Data& x, const Data& y) {
  Data d = x;
  for (size_t i = 0; i < d.size(); ++i) d[i] += y[i];
  return d;
}

}  // namespace

// ---- Meta, text, verifier, VJP ---------------------------------------------

TEST_CASE("send and recv infer futures of the message's type", "[p2p]") {
  TensorType x = tt({2, 3}, DType::bf16);
  x.dist = DistType::replicated;
  const std::vector<TensorType> s = infer_types(OpId::Send, {OperandType::of(x)}, peer_attrs(1));
  REQUIRE(s.size() == 1);
  TensorType want = x;
  want.future = true;
  CHECK(s[0] == want);
  const std::vector<TensorType> r = infer_types(OpId::Recv, {}, recv_attrs(0, {2, 64, 64}, "i64"));
  REQUIRE(r.size() == 1);
  TensorType got = tt({2, 64, 64}, DType::i64);
  got.future = true;
  CHECK(r[0] == got);
  CHECK(r[0].dist == DistType::none);
}

TEST_CASE("send and recv reject bad attributes with the op's name", "[p2p]") {
  auto send_with = [](Attrs a) { return infer_types(OpId::Send, {kX}, a); };
  auto recv_with = [](Attrs a) { return infer_types(OpId::Recv, {}, a); };
  CHECK_THROWS_WITH(send_with({{"group", "pp"}, {"size", int64_t{2}}}),
                    Contains("send: missing attribute 'peer'"));
  CHECK_THROWS_WITH(send_with({{"size", int64_t{2}}, {"peer", int64_t{1}}}),
                    Contains("send: missing attribute 'group'"));
  CHECK_THROWS_WITH(send_with({{"group", ""}, {"size", int64_t{2}}, {"peer", int64_t{1}}}),
                    Contains("send: group is empty"));
  CHECK_THROWS_WITH(send_with(peer_attrs(0, 1)), Contains("send: size 1 must be >= 2"));
  CHECK_THROWS_WITH(send_with(peer_attrs(2, 2)), Contains("send: peer 2 out of range for group size 2"));
  CHECK_THROWS_WITH(send_with(peer_attrs(-1, 4)), Contains("send: peer -1 out of range for group size 4"));
  CHECK_THROWS_WITH(infer_types(OpId::Send, {}, peer_attrs(1)), Contains("send: expects 1 input, got 0"));
  CHECK_THROWS_WITH(infer_types(OpId::Recv, {kX}, recv_attrs(0, {2})), Contains("recv: expects 0 inputs, got 1"));

  CHECK_THROWS_WITH(recv_with(peer_attrs(0)), Contains("recv: missing attribute 'shape'"));
  CHECK_THROWS_WITH(recv_with(recv_attrs(5, {2})), Contains("recv: peer 5 out of range for group size 2"));
  Attrs one = recv_attrs(0, {2});
  one.set("size", int64_t{0});
  CHECK_THROWS_WITH(recv_with(one), Contains("recv: size 0 must be >= 2"));
  CHECK_THROWS_WITH(recv_with(recv_attrs(0, {2, -1})), Contains("recv: shape [2, -1] has a negative size"));
  CHECK_THROWS_WITH(recv_with(recv_attrs(0, {2}, "f8")), Contains("recv: attribute 'dtype' = 'f8' is not a dtype"));
  Attrs tpu = recv_attrs(0, {2});
  tpu.set("device", "tpu");
  CHECK_THROWS_WITH(recv_with(tpu), Contains("recv: device 'tpu' is not a device (expected cpu or cuda:N)"));
  Attrs no_device = peer_attrs(0);
  no_device.set("shape", IntList{2});
  no_device.set("dtype", "f32");
  CHECK_THROWS_WITH(recv_with(no_device), Contains("recv: missing attribute 'device'"));
}

TEST_CASE("send and recv print, parse and round-trip through JSON", "[p2p]") {
  for (const Trace& t : {stage0_forward(), stage1(), stage0_backward()}) {
    REQUIRE_NOTHROW(verify(t));
    const std::string text = print_trace(t);
    const Trace parsed = parse_trace(text);
    CHECK(parsed == t);
    CHECK(print_trace(parsed) == text);
    CHECK(trace_from_json(trace_to_json(t)) == t);
  }
  const std::string one = print_trace(stage1());
  INFO(one);
  CHECK_THAT(one, Contains("ft0 = recv(group=pp, size=2, peer=0, shape=[2, 3], dtype=f32, device=cpu)  # ft0: \"FUTURE "
                           "cpu f32[2, 3]\""));
  CHECK_THAT(one, Contains(" = send(t2, group=pp, size=2, peer=0)"));
}

TEST_CASE("the verifier holds send and recv futures to the wait rules", "[p2p]") {
  Trace never;
  TraceBuilder b(never);
  const Proxy f = b.emit1(OpId::Recv, {}, recv_attrs(0, {2}));
  returns(never, {});
  CHECK_THROWS_WITH(verify(never), Contains(f.name + " (defined by statement 1 (recv)) is a future that is never waited"));

  Trace twice_waited = stage0_backward();
  BoundSymbol again = twice_waited.bsyms[1];
  twice_waited.bsyms.push_back(again);
  twice_waited.bsyms.back().outputs[0].name = "t99";
  CHECK_THROWS_WITH(verify(twice_waited), Contains("is waited twice"));

  Trace used = stage0_forward();  // mul, send, wait: the send's future into a neg
  BoundSymbol neg;
  neg.op = OpId::Neg;
  neg.inputs = {Operand::of(used.bsyms[1].output().name)};
  neg.outputs = {Proxy{"t98", tt({2, 3}), "", true}};
  used.bsyms.insert(used.bsyms.begin() + 2, neg);
  CHECK_THROWS_WITH(verify(used), Contains("is a future; only wait may consume it"));
}

// The pipeline pass inserts them after autodiff, so asking for their VJP is a
// mistake with a clear message, not an internal check.
TEST_CASE("send has no VJP and says so; recv has no inputs to differentiate", "[p2p]") {
  Trace t = stage0_forward();
  const BoundSymbol sent = t.bsyms[1];
  REQUIRE(sent.op == OpId::Send);
  Trace back;
  TraceBuilder b(back);
  const Proxy g = b.add_arg(Proxy{"g", tt({2, 3}), "", true});
  CHECK_THROWS_AS(vjp(b, sent, {g}, {true}), Error);
  CHECK_THROWS_WITH(vjp(b, sent, {g}, {true}),
                    Contains("no VJP for send (" + sent.output().name + ")") && Contains("after autodiff"));
  const BoundSymbol received = stage0_backward().bsyms[0];
  CHECK(vjp(b, received, {g}, {}).empty());
}

// ---- Claims -------------------------------------------------------------------

TEST_CASE("the mpi executor claims send and recv of CPU tensors; cpu does not", "[p2p]") {
  const Trace t = stage1();
  CHECK(mpi_executor().claims(t.bsyms[0]));  // recv
  CHECK(mpi_executor().claims(t.bsyms[3]));  // send
  CHECK_FALSE(cpu_executor().claims(t.bsyms[0]));
  CHECK_FALSE(cpu_executor().claims(t.bsyms[3]));
  const std::string text = print_trace(claim(t, {&cpu_executor(), &mpi_executor()}));
  CHECK_THAT(text, Contains("= mpi_recv(group=pp") && Contains("= mpi_send(t2, group=pp") &&
                       Contains("= cpu_add(") && Contains("= mpi_wait("));
  for (DType d : {DType::f32, DType::bf16, DType::i64, DType::boolean}) {
    INFO(dtype_name(d));
    Trace any;
    TraceBuilder b(any);
    b.emit1(OpId::Recv, {}, recv_attrs(1, {4}, std::string(dtype_name(d))));
    CHECK(mpi_executor().claims(any.bsyms[0]));
  }
}

// ---- The reference executor's Mailbox ------------------------------------------

TEST_CASE("stages exchange values through one Mailbox, rank by rank", "[p2p][reference]") {
  const Mesh mesh = flat_mesh(2);
  Mailbox mail;
  mail.position = 0;
  const auto out0 = run_spmd(stage0_forward(), mesh, per_rank(value(kX0), value(kX1)), &mail);
  CHECK(out0[0][0].data == twice(kX0));  // the sender keeps its value
  CHECK(out0[1][0].data == twice(kX1));
  CHECK_FALSE(out0[0][0].type.future);
  REQUIRE(mail.queues.size() == 2);
  CHECK(mail.queues.at({0, 1, 0}).front().data == twice(kX0));
  CHECK(mail.queues.at({0, 1, 1}).front().data == twice(kX1));

  mail.position = 1;
  const auto out1 = run_spmd(stage1(), mesh, per_rank(value(kW0), value(kW1)), &mail);
  CHECK(out1[0][0].data == twice(kX0));  // local rank 0 got local rank 0's message
  CHECK(out1[1][0].data == twice(kX1));
  CHECK(out1[0][1].data == plus(twice(kX0), kW0));
  CHECK(out1[1][1].data == plus(twice(kX1), kW1));
  CHECK(mail.queues.at({0, 1, 0}).empty());

  mail.position = 0;
  const auto back = run_spmd(stage0_backward(), mesh, {{}, {}}, &mail);
  CHECK(back[0][0].data == plus(twice(kX0), kW0));
  CHECK(back[1][0].data == plus(twice(kX1), kW1));
  CHECK(back[0][0].type.shape == Shape{2, 3});
  for (const auto& [key, queue] : mail.queues) CHECK(queue.empty());
}

TEST_CASE("messages between two stages arrive in the order they were sent", "[p2p][reference]") {
  // Stage 0 sends x, then 2x (in one trace); stage 1 receives a then b and
  // returns a and b - a, which is x only if a came first.
  Trace sender;
  {
    TraceBuilder b(sender);
    b.add_arg(Proxy{"x", tt({2, 3}), "", true});
    const std::string first = send(b, "x", 1);
    const Proxy y = b.emit1(OpId::Mul, {Operand::of("x"), Operand::lit(2.0)});
    returns(sender, {first, send(b, y.name, 1)});
  }
  Trace receiver;
  {
    TraceBuilder b(receiver);
    const std::string a = recv(b, 0, {2, 3});
    const std::string c = recv(b, 0, {2, 3});
    const Proxy d = b.emit1(OpId::Sub, {Operand::of(c), Operand::of(a)});
    returns(receiver, {a, d.name});
  }
  const Mesh mesh = flat_mesh(2);
  Mailbox mail;
  run_spmd(sender, mesh, per_rank(value(kX0), value(kX1)), &mail);
  CHECK(mail.queues.at({0, 1, 0}).size() == 2);
  // A second batch, as the next micro-batch's forward would send.
  run_spmd(sender, mesh, per_rank(value(kW0), value(kW1)), &mail);
  CHECK(mail.queues.at({0, 1, 1}).size() == 4);
  mail.position = 1;
  const auto first = run_spmd(receiver, mesh, {{}, {}}, &mail);
  CHECK(first[0][0].data == kX0);
  CHECK(first[0][1].data == kX0);
  CHECK(first[1][0].data == kX1);
  CHECK(first[1][1].data == kX1);
  const auto second = run_spmd(receiver, mesh, {{}, {}}, &mail);
  CHECK(second[0][0].data == kW0);
  CHECK(second[1][1].data == kW1);
  CHECK(mail.queues.at({0, 1, 0}).empty());
}

TEST_CASE("point-to-point errors of the reference executor", "[p2p][reference]") {
  const Mesh mesh = flat_mesh(2);
  const Trace s0 = stage0_forward();
  const std::string sent = s0.bsyms[1].output().name;
  SECTION("send or recv without a mailbox") {
    CHECK_THROWS_AS(run_spmd(s0, mesh, per_rank(value(kX0), value(kX1))), Error);
    CHECK_THROWS_WITH(run_spmd(s0, mesh, per_rank(value(kX0), value(kX1))),
                      Contains("send " + sent +
                               ": point-to-point ops need a Mailbox (reference::run_spmd's mailbox argument)"));
    CHECK_THROWS_WITH(run(stage0_backward(), {}), Contains("recv ft0: point-to-point ops need a Mailbox"));
  }
  SECTION("recv with nothing sent") {
    Mailbox mail;
    mail.position = 1;
    CHECK_THROWS_WITH(run_spmd(stage1(), mesh, per_rank(value(kW0), value(kW1)), &mail),
                      Contains("recv ft0: no message waiting from peer 0 to position 1 for local rank 0") &&
                          Contains("group 'pp'"));
  }
  SECTION("one more recv than sends") {
    Mailbox mail;
    run_spmd(s0, mesh, per_rank(value(kX0), value(kX1)), &mail);
    mail.position = 1;
    run_spmd(stage1(), mesh, per_rank(value(kW0), value(kW1)), &mail);
    CHECK_THROWS_WITH(run_spmd(stage1(), mesh, per_rank(value(kW0), value(kW1)), &mail),
                      Contains("no message waiting from peer 0 to position 1"));
  }
  SECTION("a message of another shape or dtype") {
    Mailbox mail;
    run_spmd(s0, mesh, per_rank(value(kX0), value(kX1)), &mail);
    mail.position = 1;
    Trace wrong_shape;
    {
      TraceBuilder b(wrong_shape);
      returns(wrong_shape, {recv(b, 0, {3, 2})});
    }
    CHECK_THROWS_WITH(run_spmd(wrong_shape, mesh, {{}, {}}, &mail),
                      Contains("recv ft0: the message from peer 0 to position 1 (local rank 0) is f32[2, 3], but "
                               "the recv expects f32[3, 2]"));
    Trace wrong_dtype;
    {
      TraceBuilder b(wrong_dtype);
      returns(wrong_dtype, {recv(b, 0, {2, 3}, "i32")});
    }
    CHECK_THROWS_WITH(run_spmd(wrong_dtype, mesh, {{}, {}}, &mail),
                      Contains("is f32[2, 3], but the recv expects i32[2, 3]"));
    // A failed recv takes nothing: the right one still finds both ranks' messages.
    CHECK(mail.queues.at({0, 1, 0}).size() == 1);
    CHECK(mail.queues.at({0, 1, 1}).size() == 1);
    const auto got = run_spmd(stage1(), mesh, per_rank(value(kW0), value(kW1)), &mail);
    CHECK(got[1][0].data == twice(kX1));
  }
  SECTION("a peer that is this run's own position, or a position outside the group") {
    Mailbox mail;
    mail.position = 1;
    CHECK_THROWS_WITH(run_spmd(s0, mesh, per_rank(value(kX0), value(kX1)), &mail),
                      Contains("send " + sent + ": peer 1 is this run's own position in group 'pp'"));
    mail.position = 2;
    CHECK_THROWS_WITH(run_spmd(s0, mesh, per_rank(value(kX0), value(kX1)), &mail),
                      Contains("the mailbox's position 2 is outside group 'pp' of size 2"));
    CHECK(mail.queues.empty());
  }
}

// The pp group is not part of a stage's mesh: `size` is not checked against it,
// and the local ranks are the mesh's (here a 2x1 mesh, so a collective over dp
// runs in the same trace).
TEST_CASE("point-to-point ops run beside collectives of the stage's own mesh", "[p2p][reference]") {
  Trace t;
  TraceBuilder b(t);
  b.add_arg(Proxy{"x", tt({2, 3}), "", true});
  const Proxy f = b.emit1(OpId::AllReduce, {Operand::of("x")}, Attrs{{"group", "dp"}, {"size", int64_t{2}}, {"op", "sum"}});
  const Proxy sum = b.emit1(OpId::Wait, {Operand::of(f.name)});
  const Proxy s = b.emit1(OpId::Send, {Operand::of(sum.name)}, Attrs{{"group", "pp"}, {"size", int64_t{4}}, {"peer", int64_t{3}}});
  returns(t, {b.emit1(OpId::Wait, {Operand::of(s.name)}).name});
  Mailbox mail;
  mail.position = 2;
  run_spmd(t, Mesh{2, 1}, per_rank(value(kX0), value(kX1)), &mail);
  CHECK(mail.queues.at({2, 3, 0}).front().data == plus(kX0, kX1));
  CHECK(mail.queues.at({2, 3, 1}).front().data == plus(kX0, kX1));
}
