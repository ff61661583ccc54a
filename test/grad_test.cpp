// The grad pass's structure: joint traces of the built-in models verify, the
// mlp's is pinned as text, and synchronize lowers to the collectives each
// strategy needs (zero3 with and without padding, tied and frozen weights,
// DDP, hybrid, no_sync, gradient accumulation). Numerical correctness of the
// rules is vjp_check_test's job.
#include <catch2/catch.hpp>

#include "frontend/models/registry.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/grad.h"

using namespace fsdpc;
using Catch::Contains;

namespace {

Trace captured(const std::string& name) {
  auto m = make_model(name);
  return capture(*m);
}

const BoundSymbol* definition(const Trace& t, const std::string& name) {
  for (const BoundSymbol& b : t.bsyms)
    for (const Proxy& o : b.outputs)
      if (o.name == name) return &b;
  return nullptr;
}

// The statement defining the input `i` of `b`; fails the test when absent.
const BoundSymbol& producer(const Trace& t, const BoundSymbol& b, size_t i = 0) {
  REQUIRE(i < b.inputs.size());
  const BoundSymbol* d = definition(t, b.inputs[i].name);
  REQUIRE(d != nullptr);
  return *d;
}

int count_ops(const Trace& t, OpId op) {
  int n = 0;
  for (const BoundSymbol& b : t.bsyms) n += b.op == op;
  return n;
}

// The flattened gradient tuple: the joint trace's last return item.
std::vector<std::string> grad_names(const Trace& joint) {
  REQUIRE(joint.returns.is_tuple);
  REQUIRE(!joint.returns.items.empty());
  std::vector<std::string> names;
  joint.returns.items.back().collect_names(names);
  return names;
}

Proxy arg(std::string name, Shape shape, DistType dist = DistType::none) {
  Proxy p;
  p.name = std::move(name);
  p.type.shape = std::move(shape);
  p.type.dist = dist;
  return p;
}

Proxy param(const std::string& path, Shape shape, DistType dist, bool requires_grad = true) {
  Proxy p = arg(param_proxy_name(path), std::move(shape), dist);
  p.param_path = path;
  p.requires_grad = requires_grad;
  return p;
}

Attrs sync_attrs(const std::string& group, int64_t size, Shape full) {
  return Attrs{{"group", group}, {"size", size}, {"shape", IntList(full)}};
}

Operand in(const Proxy& p) { return Operand::of(p.name); }

// x [8, 64] -> linear(sync(w0)) -> tanh -> linear(sync(w2)) -> sum: the
// tutorial MLP as the fsdp pass leaves it, with weights of `rows` rows
// sharded over `size` ranks.
Trace sharded_mlp(int64_t rows, int64_t size, bool w2_trainable = true) {
  Trace t;
  TraceBuilder b(t);
  const int64_t shard = (rows + size - 1) / size;
  Proxy x = b.add_arg(arg("x", {8, 64}));
  Proxy w0 = b.add_arg(param("0.weight", {shard, 64}, DistType::fully_sharded));
  Proxy w2 = b.add_arg(param("2.weight", {shard, 64}, DistType::fully_sharded, w2_trainable));
  Proxy s0 = b.emit1(OpId::Synchronize, {in(w0)}, sync_attrs("dp", size, {rows, 64}));
  Proxy h = b.emit1(OpId::Tanh, {in(b.emit1(OpId::Linear, {in(x), in(s0)}))});
  Proxy s2 = b.emit1(OpId::Synchronize, {in(w2)}, sync_attrs("dp", size, {rows, 64}));
  Proxy y = b.emit1(OpId::Linear, {in(h), in(b.emit1(OpId::Permute, {in(s2)}, {{"dims", IntList{1, 0}}}))});
  Proxy loss = b.emit1(OpId::Sum, {in(y)}, {{"dims", IntList{0, 1}}});
  t.returns = ReturnTree::leaf(loss.name);
  verify(t);
  return t;
}

// The backward chain that produced gradient `g`, innermost first, as op names.
std::vector<std::string> chain(const Trace& t, const std::string& g, size_t depth) {
  std::vector<std::string> ops;
  const BoundSymbol* b = definition(t, g);
  while (b && ops.size() < depth) {
    ops.insert(ops.begin(), std::string(op_name(b->op)));
    b = b->inputs.empty() || b->inputs[0].is_scalar() ? nullptr : definition(t, b->inputs[0].name);
  }
  return ops;
}

const TensorType& type_of(const Trace& t, const std::string& name) {
  for (const Proxy& a : t.args)
    if (a.name == name) return a.type;
  const BoundSymbol* d = definition(t, name);
  REQUIRE(d != nullptr);
  for (const Proxy& o : d->outputs)
    if (o.name == name) return o.type;
  FAIL("no type for " << name);
  return t.args[0].type;
}

}  // namespace

const char* const kMlpJoint = R"(# Constructed by grad
def computation(x, t_0_weight, t_2_weight, cotangent):
  # x: "cpu f32[64, 64]"
  # t_0_weight: "cpu f32[64, 64]" param=0.weight
  # t_2_weight: "cpu f32[64, 64]" param=2.weight
  # cotangent: "cpu f32[64, 64]"
  t0 = linear(x, t_0_weight)  # t0: "cpu f32[64, 64]"
    # t1 = permute(t_0_weight, dims=[1, 0])  # t1: "cpu f32[64, 64]"
    # t0 = matmul(x, t1)  # t0: "cpu f32[64, 64]"
  t3 = tanh(t0)  # t3: "cpu f32[64, 64]"
  t4 = linear(t3, t_2_weight)  # t4: "cpu f32[64, 64]"
    # t5 = permute(t_2_weight, dims=[1, 0])  # t5: "cpu f32[64, 64]"
    # t4 = matmul(t3, t5)  # t4: "cpu f32[64, 64]"
  t7 = matmul(cotangent, t_2_weight)  # t7: "cpu f32[64, 64]"
  t8 = permute(cotangent, dims=[1, 0])  # t8: "cpu f32[64, 64]"
  t9 = matmul(t8, t3)  # t9: "cpu f32[64, 64]"
  t10 = mul(t3, t3)  # t10: "cpu f32[64, 64]"
  t11 = sub(1.0, t10)  # t11: "cpu f32[64, 64]"
  t12 = mul(t7, t11)  # t12: "cpu f32[64, 64]"
  t13 = permute(t12, dims=[1, 0])  # t13: "cpu f32[64, 64]"
  t14 = matmul(t13, x)  # t14: "cpu f32[64, 64]"
  return t4, (t14, t9)
)";

TEST_CASE("grad: the mlp joint trace is forward then backward, pinned as text", "[grad]") {
  Trace joint = grad(captured("mlp"));
  CHECK_NOTHROW(verify(joint));
  CHECK(print_trace(joint) == kMlpJoint);
}

TEST_CASE("grad: gpt2-tiny's joint trace verifies and returns one gradient per parameter",
          "[grad]") {
  Trace t = captured("gpt2-tiny");
  Trace joint = grad(t);
  REQUIRE_NOTHROW(verify(joint));
  CHECK(joint.provenance == "grad");
  CHECK(joint.args.back().name == "cotangent");
  CHECK(joint.args.back().type.shape.empty());
  REQUIRE(joint.returns.items.size() == 2);
  CHECK(joint.returns.items[0].name == t.returns.name);
  std::vector<std::string> grads = grad_names(joint);
  size_t p = 0;
  for (const Proxy& a : t.args) {
    if (!a.is_param()) continue;
    REQUIRE(p < grads.size());
    CHECK(type_of(joint, grads[p]).shape == a.type.shape);
    ++p;
  }
  CHECK(p == grads.size());
  // The forward is untouched: the captured statements come first, as they were.
  for (size_t i = 0; i < t.bsyms.size(); ++i) CHECK(joint.bsyms[i] == t.bsyms[i]);
  // The tied wte (take + head linear) adds its two cotangents once.
  const BoundSymbol* g = definition(joint, grads[0]);
  REQUIRE(g != nullptr);
  CHECK(g->op == OpId::Add);
}

TEST_CASE("grad: zero3 lowers synchronize to all_gather + wait and div + reduce_scatter + wait",
          "[grad]") {
  Trace joint = grad(sharded_mlp(64, 2));
  REQUIRE_NOTHROW(verify(joint));
  // Forward: the gathered weight keeps the synchronize's name.
  const BoundSymbol& lin = joint.bsyms[2];
  REQUIRE(lin.op == OpId::Linear);
  const BoundSymbol& w = producer(joint, lin, 1);
  CHECK(w.op == OpId::Wait);
  const BoundSymbol& ag = producer(joint, w);
  CHECK(ag.op == OpId::AllGather);
  CHECK(ag.inputs[0].name == "t_0_weight");
  CHECK(ag.attrs == Attrs{{"group", std::string("dp")}, {"size", int64_t{2}}, {"dim", int64_t{0}}});
  CHECK(count_ops(joint, OpId::Slice) == 0);
  CHECK(count_ops(joint, OpId::Synchronize) == 0);
  // Backward: div by the world, reduce_scatter over dp, wait.
  std::vector<std::string> grads = grad_names(joint);
  REQUIRE(grads.size() == 2);
  for (const std::string& g : grads) {
    CHECK(chain(joint, g, 3) == std::vector<std::string>{"div", "reduce_scatter", "wait"});
    const BoundSymbol& rs = producer(joint, *definition(joint, g));
    CHECK(rs.attrs == Attrs{{"group", std::string("dp")}, {"size", int64_t{2}},
                            {"dim", int64_t{0}}, {"op", std::string("sum")}});
    CHECK(producer(joint, rs).inputs[1].scalar == 2.0);
    const TensorType& t = type_of(joint, g);
    CHECK(t.shape == Shape{32, 64});
    CHECK(t.dist == DistType::fully_sharded);
  }
}

TEST_CASE("grad: padded shards are sliced after the gather and padded before the reduce",
          "[grad]") {
  // 64 rows over 3 ranks: 22 per shard, 66 gathered.
  Trace joint = grad(sharded_mlp(64, 3));
  REQUIRE_NOTHROW(verify(joint));
  const BoundSymbol& sl = producer(joint, joint.bsyms[3], 1);
  CHECK(sl.op == OpId::Slice);
  CHECK(sl.attrs.get_ints("ends") == IntList{64, 64});
  CHECK(type_of(joint, producer(joint, sl).outputs[0].name).shape == Shape{66, 64});
  for (const std::string& g : grad_names(joint)) {
    CHECK(chain(joint, g, 4) == std::vector<std::string>{"div", "pad", "reduce_scatter", "wait"});
    const BoundSymbol& pad = producer(joint, producer(joint, *definition(joint, g)));
    CHECK(pad.attrs.get_ints("hi") == IntList{2, 0});
    CHECK(producer(joint, pad).inputs[1].scalar == 3.0);
    CHECK(type_of(joint, g).shape == Shape{22, 64});
    CHECK(type_of(joint, g).dist == DistType::fully_sharded);
  }
}

TEST_CASE("grad: a frozen parameter is gathered but never reduced and has no gradient", "[grad]") {
  Trace joint = grad(sharded_mlp(64, 2, /*w2_trainable=*/false));
  REQUIRE_NOTHROW(verify(joint));
  CHECK(count_ops(joint, OpId::AllGather) == 2);
  CHECK(count_ops(joint, OpId::ReduceScatter) == 1);
  std::vector<std::string> grads = grad_names(joint);
  REQUIRE(grads.size() == 1);
  CHECK(type_of(joint, grads[0]).shape == Shape{32, 64});
}

TEST_CASE("grad: a tied parameter is reduced once, from the sum of its uses", "[grad]") {
  Trace t;
  TraceBuilder b(t);
  Proxy idx = arg("idx", {2, 4});
  idx.type.dtype = DType::i64;
  b.add_arg(idx);
  Proxy wte = b.add_arg(param("wte.weight", {8, 16}, DistType::fully_sharded));
  Proxy s = b.emit1(OpId::Synchronize, {in(wte)}, sync_attrs("dp", 2, {16, 16}));
  Proxy e = b.emit1(OpId::Take, {in(s), in(idx)}, {{"dim", int64_t{0}}});
  Proxy logits = b.emit1(OpId::Linear, {in(e), in(s)});
  Proxy loss = b.emit1(OpId::Sum, {in(logits)}, {{"dims", IntList{0, 1, 2}}});
  t.returns = ReturnTree::leaf(loss.name);
  Trace joint = grad(t);
  REQUIRE_NOTHROW(verify(joint));
  CHECK(count_ops(joint, OpId::ReduceScatter) == 1);
  CHECK(count_ops(joint, OpId::Div) == 1);
  std::vector<std::string> grads = grad_names(joint);
  REQUIRE(grads.size() == 1);
  CHECK(chain(joint, grads[0], 4) == std::vector<std::string>{"add", "div", "reduce_scatter", "wait"});
}

TEST_CASE("grad: DDP (replicated) uses the parameter as it is and all_reduces its gradient",
          "[grad]") {
  Trace t;
  TraceBuilder b(t);
  Proxy x = b.add_arg(arg("x", {8, 64}));
  Proxy w = b.add_arg(param("0.weight", {64, 64}, DistType::replicated));
  Proxy s = b.emit1(OpId::Synchronize, {in(w)}, {{"group", std::string("dp")}, {"size", int64_t{2}}});
  Proxy y = b.emit1(OpId::Linear, {in(x), in(s)});
  t.returns = ReturnTree::leaf(b.emit1(OpId::Sum, {in(y)}, {{"dims", IntList{0, 1}}}).name);
  Trace joint = grad(t);
  REQUIRE_NOTHROW(verify(joint));
  CHECK(count_ops(joint, OpId::AllGather) == 0);
  CHECK(joint.bsyms[0].op == OpId::Linear);
  CHECK(joint.bsyms[0].inputs[1].name == "t_0_weight");
  std::vector<std::string> grads = grad_names(joint);
  REQUIRE(grads.size() == 1);
  CHECK(chain(joint, grads[0], 3) == std::vector<std::string>{"div", "all_reduce", "wait"});
  CHECK(type_of(joint, grads[0]).shape == Shape{64, 64});
  CHECK(type_of(joint, grads[0]).dist == DistType::replicated);
}

TEST_CASE("grad: hybrid reduce_scatters in the shard group, then all_reduces across replicas",
          "[grad]") {
  Trace t;
  TraceBuilder b(t);
  Proxy x = b.add_arg(arg("x", {8, 64}));
  Proxy w = b.add_arg(param("0.weight", {32, 64}, DistType::fully_sharded));
  Attrs a = sync_attrs("shard", 2, {64, 64});
  a.set("replicate_group", std::string("replicate")).set("replicate_size", int64_t{3});
  Proxy s = b.emit1(OpId::Synchronize, {in(w)}, a);
  Proxy y = b.emit1(OpId::Linear, {in(x), in(s)});
  t.returns = ReturnTree::leaf(b.emit1(OpId::Sum, {in(y)}, {{"dims", IntList{0, 1}}}).name);
  Trace joint = grad(t);
  REQUIRE_NOTHROW(verify(joint));
  std::vector<std::string> grads = grad_names(joint);
  REQUIRE(grads.size() == 1);
  CHECK(chain(joint, grads[0], 5) ==
        std::vector<std::string>{"div", "reduce_scatter", "wait", "all_reduce", "wait"});
  const BoundSymbol& ar = producer(joint, *definition(joint, grads[0]));
  CHECK(ar.attrs.get_str("group") == "replicate");
  CHECK(ar.attrs.get_int("size") == 3);
  const BoundSymbol& rs = producer(joint, producer(joint, ar));
  CHECK(rs.attrs.get_str("group") == "shard");
  CHECK(producer(joint, rs).inputs[1].scalar == 6.0);  // world = 2 shards x 3 replicas
  CHECK(type_of(joint, grads[0]).shape == Shape{32, 64});
}

TEST_CASE("grad: no_sync returns the local, unsharded, undivided gradients", "[grad]") {
  GradOptions o;
  o.sync_grads = false;
  Trace joint = grad(sharded_mlp(64, 3), o);
  REQUIRE_NOTHROW(verify(joint));
  CHECK(count_ops(joint, OpId::AllGather) == 2);
  CHECK(count_ops(joint, OpId::ReduceScatter) == 0);
  CHECK(count_ops(joint, OpId::Div) == 0);
  for (const std::string& g : grad_names(joint)) CHECK(type_of(joint, g).shape == Shape{64, 64});
}

TEST_CASE("grad: accumulate_grads adds acc_<param> before the synchronisation", "[grad]") {
  GradOptions o;
  o.accumulate_grads = true;
  Trace joint = grad(sharded_mlp(64, 2, /*w2_trainable=*/false), o);
  REQUIRE_NOTHROW(verify(joint));
  REQUIRE(joint.args.size() == 5);
  CHECK(joint.args[3].name == "acc_t_0_weight");
  CHECK(joint.args[3].type.shape == Shape{64, 64});
  CHECK(joint.args[3].type.dist == DistType::none);
  CHECK(joint.args[4].name == "cotangent");
  std::vector<std::string> grads = grad_names(joint);
  REQUIRE(grads.size() == 1);
  CHECK(chain(joint, grads[0], 4) == std::vector<std::string>{"add", "div", "reduce_scatter", "wait"});
  const BoundSymbol& add = producer(joint, producer(joint, producer(joint, *definition(joint, grads[0]))));
  CHECK(add.inputs[1].name == "acc_t_0_weight");

  o.sync_grads = false;  // a micro-batch in the middle: accumulate, do not reduce
  Trace mid = grad(sharded_mlp(64, 2, false), o);
  REQUIRE_NOTHROW(verify(mid));
  grads = grad_names(mid);
  REQUIRE(grads.size() == 1);
  const BoundSymbol* g = definition(mid, grads[0]);
  REQUIRE(g != nullptr);
  CHECK(g->op == OpId::Add);
  CHECK(g->inputs[1].name == "acc_t_0_weight");
  CHECK(type_of(mid, grads[0]).shape == Shape{64, 64});
}

TEST_CASE("grad: tuple returns keep their items; unused parameters get zeros", "[grad]") {
  Trace t;
  TraceBuilder b(t);
  Proxy w = b.add_arg(param("w", {3}, DistType::none));
  b.add_arg(param("unused", {2, 2}, DistType::none));
  Proxy e = b.emit1(OpId::Exp, {in(w)});
  Proxy loss = b.emit1(OpId::Sum, {in(e)}, {{"dims", IntList{0}}});
  t.returns = ReturnTree::tuple({ReturnTree::leaf(loss.name), ReturnTree::leaf(e.name)});
  Trace joint = grad(t);
  REQUIRE_NOTHROW(verify(joint));
  REQUIRE(joint.returns.items.size() == 3);
  CHECK(joint.returns.items[0].name == loss.name);
  CHECK(joint.returns.items[1].name == e.name);
  std::vector<std::string> grads = grad_names(joint);
  REQUIRE(grads.size() == 2);
  CHECK(definition(joint, grads[1])->op == OpId::Full);
  CHECK(type_of(joint, grads[1]).shape == Shape{2, 2});
}

TEST_CASE("grad: a non-float first return and broadcast are rejected with a message", "[grad]") {
  Trace t;
  TraceBuilder b(t);
  Proxy w = b.add_arg(param("w", {3}, DistType::none));
  Proxy c = b.emit1(OpId::Gt, {in(w), Operand::lit(0.0)});
  t.returns = ReturnTree::leaf(c.name);
  CHECK_THROWS_WITH(grad(t), Contains("expected a float tensor"));

  Trace u;
  TraceBuilder ub(u);
  Proxy v = ub.add_arg(param("w", {3}, DistType::none));
  Proxy f = ub.emit1(OpId::Broadcast, {in(v)},
                     {{"group", std::string("dp")}, {"size", int64_t{2}}, {"root", int64_t{0}}});
  Proxy r = ub.emit1(OpId::Sum, {in(ub.emit1(OpId::Wait, {in(f)}))}, {{"dims", IntList{0}}});
  u.returns = ReturnTree::leaf(r.name);
  CHECK_THROWS_WITH(grad(u), Contains("no VJP for broadcast"));
}
