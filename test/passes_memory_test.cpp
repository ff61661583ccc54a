// The memory and clean-up passes (dce, cse, del) and trace statistics, on
// hand-built traces whose answers are worked out by hand and on captured
// models, where every result must still verify.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "frontend/models/registry.h"
#include "ir/builder.h"
#include "ir/json.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/del.h"
#include "passes/stats.h"

using namespace fsdpc;

namespace {

Proxy arg(std::string name, Shape shape, DistType dist = DistType::none, std::string path = "") {
  Proxy p;
  p.name = std::move(name);
  p.type.shape = std::move(shape);
  p.type.dist = dist;
  p.param_path = std::move(path);
  return p;
}

Operand in(const std::string& name) { return Operand::of(name); }
Operand in(const Proxy& p) { return Operand::of(p.name); }

Attrs group(int64_t size) { return {{"group", std::string("dp")}, {"size", size}}; }
Attrs gather(int64_t size) { return group(size).set("dim", int64_t{0}); }
Attrs scatter(int64_t size) { return gather(size).set("op", std::string("sum")); }
Attrs reduce(int64_t size) { return group(size).set("op", std::string("sum")); }

BoundSymbol del_of(std::vector<std::string> names) {
  BoundSymbol d;
  d.op = OpId::Del;
  for (std::string& n : names) d.inputs.push_back(Operand::of(std::move(n)));
  return d;
}

std::vector<OpId> ops_of(const Trace& t) {
  std::vector<OpId> ops;
  for (const BoundSymbol& b : t.bsyms) ops.push_back(b.op);
  return ops;
}

ReturnTree returns(std::vector<std::string> names) {
  std::vector<ReturnTree> leaves;
  for (std::string& n : names) leaves.push_back(ReturnTree::leaf(std::move(n)));
  return ReturnTree::tuple(std::move(leaves));
}

int64_t bytes(const TensorType& t) { return numel(t.shape) * dtype_size(t.dtype); }

Trace captured(const std::string& model) { return capture(*make_model(model)); }

}  // namespace

TEST_CASE("dce removes a dead chain, collective and wait included", "[dce]") {
  Trace t;
  TraceBuilder b(t);
  b.add_arg(arg("x", {4, 4}));
  b.add_arg(arg("t_w", {2, 4}, DistType::fully_sharded, "w"));
  Proxy t0 = b.emit1(OpId::Neg, {in("x")});
  Proxy ft = b.emit1(OpId::AllGather, {in("t_w")}, gather(2));  // dead from here ...
  Proxy full = b.emit1(OpId::Wait, {in(ft)});
  Proxy dead = b.emit1(OpId::Exp, {in(full)});  // ... to here
  t.bsyms.push_back(del_of({full.name}));
  Proxy out = b.emit1(OpId::Mul, {in(t0), Operand::lit(2.0)});
  t.bsyms.push_back(del_of({t0.name, dead.name}));
  t.returns = returns({out.name});
  REQUIRE_NOTHROW(verify(t));

  Trace d = dce(t);
  CHECK_NOTHROW(verify(d));
  CHECK(d.provenance == "dce");
  CHECK(ops_of(d) == std::vector<OpId>{OpId::Neg, OpId::Mul, OpId::Del});
  CHECK(d.bsyms.back().inputs == std::vector<Operand>{in(t0)});  // the freed dead value is gone
  CHECK(dce(d).bsyms == d.bsyms);  // a fixed point
}

TEST_CASE("dce keeps what the returns need, and leaves sub-symbols alone", "[dce]") {
  for (const char* model : {"mlp", "gpt2-tiny"}) {
    Trace t = captured(model);
    Trace d = dce(t);
    CHECK_NOTHROW(verify(d));
    CHECK(d.bsyms == t.bsyms);  // a captured model computes nothing it throws away
    Trace with_dels = insert_dels(t);
    CHECK(dce(with_dels).bsyms == with_dels.bsyms);
  }
  // Unused arguments stay: dce removes statements, never arguments.
  Trace t;
  t.args = {arg("x", {2}), arg("y", {2})};
  t.returns = returns({"x"});
  CHECK(dce(t).args.size() == 2);
}

TEST_CASE("cse merges identical pure statements but never collectives", "[cse]") {
  Trace t;
  TraceBuilder b(t);
  b.add_arg(arg("t_b", {4}, DistType::none, "b"));
  b.add_arg(arg("t_w", {2, 4}, DistType::fully_sharded, "w"));
  const Attrs bcast{{"shape", IntList{2, 4}}, {"broadcast_dims", IntList{1}}};
  Proxy b0 = b.emit1(OpId::BroadcastInDim, {in("t_b")}, bcast);
  Proxy b1 = b.emit1(OpId::BroadcastInDim, {in("t_b")}, bcast);
  Proxy sum = b.emit1(OpId::Add, {in(b0), in(b1)});
  Proxy f0 = b.emit1(OpId::AllGather, {in("t_w")}, gather(2));
  Proxy f1 = b.emit1(OpId::AllGather, {in("t_w")}, gather(2));
  Proxy w0 = b.emit1(OpId::Wait, {in(f0)});
  Proxy w1 = b.emit1(OpId::Wait, {in(f1)});
  const Attrs fill{{"shape", IntList{2, 4}}, {"value", 0.5}, {"dtype", std::string("f32")},
                   {"device", std::string("cpu")}};
  Proxy c0 = b.emit1(OpId::Full, {}, fill);
  Proxy c1 = b.emit1(OpId::Full, {}, fill);
  Proxy c2 = b.emit1(OpId::Full, {}, Attrs(fill).set("value", 1.5));  // differs: kept
  Proxy m0 = b.emit1(OpId::Mul, {in(c0), in(c1)});
  Proxy m1 = b.emit1(OpId::Mul, {in(c1), in(c2)});
  t.returns = returns({sum.name, w0.name, w1.name, m0.name, m1.name, b1.name});
  REQUIRE_NOTHROW(verify(t));

  Trace c = cse(t);
  CHECK_NOTHROW(verify(c));
  CHECK(c.provenance == "cse");
  CHECK(ops_of(c) == std::vector<OpId>{OpId::BroadcastInDim, OpId::Add, OpId::AllGather,
                                       OpId::AllGather, OpId::Wait, OpId::Wait, OpId::Full,
                                       OpId::Full, OpId::Mul, OpId::Mul});
  CHECK(c.bsyms[1].inputs == std::vector<Operand>{in(b0), in(b0)});
  CHECK(c.bsyms[8].inputs == std::vector<Operand>{in(c0), in(c0)});
  CHECK(c.bsyms[9].inputs == std::vector<Operand>{in(c0), in(c2)});
  CHECK(c.returns == returns({sum.name, w0.name, w1.name, m0.name, m1.name, b0.name}));
  CHECK(cse(c).bsyms == c.bsyms);  // a fixed point
}

TEST_CASE("cse respects del: no reuse after a free, merged values lose their frees", "[cse]") {
  Trace t;
  TraceBuilder b(t);
  b.add_arg(arg("x", {4}));
  Proxy a = b.emit1(OpId::Neg, {in("x")});
  Proxy a2 = b.emit1(OpId::Neg, {in("x")});  // merges into a
  Proxy e = b.emit1(OpId::Exp, {in(a)});
  t.bsyms.push_back(del_of({a.name}));
  Proxy f = b.emit1(OpId::Log, {in(a2)});  // after cse: log(a), so a must outlive it
  t.bsyms.push_back(del_of({a2.name}));
  Proxy g = b.emit1(OpId::Tanh, {in("x")});
  t.bsyms.push_back(del_of({g.name}));
  Proxy g2 = b.emit1(OpId::Tanh, {in("x")});  // g was freed: not merged
  t.returns = returns({e.name, f.name, g2.name});
  REQUIRE_NOTHROW(verify(t));

  Trace c = cse(t);
  CHECK_NOTHROW(verify(c));
  CHECK(ops_of(c) == std::vector<OpId>{OpId::Neg, OpId::Exp, OpId::Log, OpId::Tanh, OpId::Del,
                                       OpId::Tanh});
  CHECK(c.bsyms[2].inputs == std::vector<Operand>{in(a)});
  // Running del afterwards frees the merged value after its new last use.
  Trace d = insert_dels(c);
  CHECK_NOTHROW(verify(d));
}

TEST_CASE("cse on captured models verifies and is deterministic", "[cse]") {
  for (const char* model : {"mlp", "gpt2-tiny"}) {
    Trace t = captured(model);
    Trace c = cse(t);
    CHECK_NOTHROW(verify(c));
    CHECK(c.bsyms.size() <= t.bsyms.size());
    CHECK(print_trace(cse(t)) == print_trace(c));
    CHECK(cse(c).bsyms == c.bsyms);
    CHECK_NOTHROW(verify(insert_dels(c)));
  }
}

TEST_CASE("del frees each value right after its last use", "[del]") {
  Trace t;
  TraceBuilder b(t);
  b.add_arg(arg("x", {4}));
  b.add_arg(arg("unused", {4}));
  b.add_arg(arg("t_w", {4}, DistType::none, "w"));
  Proxy t0 = b.emit1(OpId::Mul, {in("x"), in("t_w")});
  Proxy t1 = b.emit1(OpId::Exp, {in(t0)});  // never used
  Proxy t2 = b.emit1(OpId::Neg, {in(t0)});
  Proxy t3 = b.emit1(OpId::Add, {in(t2), in("x")});
  t.returns = returns({t3.name, t0.name});
  REQUIRE_NOTHROW(verify(t));

  const std::string expected =
      "# Constructed by del\n"
      "def computation(x, unused, t_w):\n"
      "  # x: \"cpu f32[4]\"\n"
      "  # unused: \"cpu f32[4]\"\n"
      "  # t_w: \"cpu f32[4]\" param=w\n"
      "  del unused\n"
      "  t0 = mul(x, t_w)  # t0: \"cpu f32[4]\"\n"
      "  t1 = exp(t0)  # t1: \"cpu f32[4]\"\n"
      "  del t1\n"
      "  t2 = neg(t0)  # t2: \"cpu f32[4]\"\n"
      "  t3 = add(t2, x)  # t3: \"cpu f32[4]\"\n"
      "  del x, t2\n"
      "  return t3, t0\n";
  Trace d = insert_dels(t);
  CHECK(print_trace(d) == expected);
  CHECK_NOTHROW(verify(d));
  CHECK(insert_dels(d) == d);  // idempotent
  CHECK(parse_trace(expected) == d);
  CHECK(trace_from_json(trace_to_json(d)) == d);  // JSON carries del as any op
  (void)t1;
}

TEST_CASE("del frees a gathered weight through its wait, never the future", "[del]") {
  Trace t;
  TraceBuilder b(t);
  b.add_arg(arg("x", {4, 4}));
  b.add_arg(arg("t_w", {2, 4}, DistType::fully_sharded, "w"));
  Proxy ft = b.emit1(OpId::AllGather, {in("t_w")}, gather(2));
  Proxy w = b.emit1(OpId::Wait, {in(ft)});
  Proxy y = b.emit1(OpId::Matmul, {in("x"), in(w)});
  t.returns = returns({y.name});
  Trace d = insert_dels(t);
  CHECK_NOTHROW(verify(d));
  REQUIRE(ops_of(d) == std::vector<OpId>{OpId::AllGather, OpId::Wait, OpId::Matmul, OpId::Del});
  CHECK(d.bsyms[3].inputs == std::vector<Operand>{in("x"), in(w)});
}

// Every non-returned, non-parameter, non-future value is deleted exactly once,
// right after the statement holding its last use.
void check_dels(const Trace& original, const Trace& d) {
  REQUIRE_NOTHROW(verify(d));
  std::vector<std::string> ret;
  original.returns.collect_names(ret);
  std::unordered_map<std::string, int> deleted;
  std::unordered_map<std::string, size_t> del_at, last_use, defined_at;
  for (size_t i = 0; i < d.bsyms.size(); ++i) {
    const BoundSymbol& b = d.bsyms[i];
    for (const Operand& o : b.inputs) {
      if (o.is_scalar()) continue;
      if (b.op == OpId::Del) {
        ++deleted[o.name];
        del_at[o.name] = i;
      } else {
        last_use[o.name] = i;
      }
    }
    for (const Proxy& p : b.outputs) defined_at[p.name] = i;
  }
  auto check_value = [&](const Proxy& p) {
    INFO(p.name);
    const bool keep = p.is_param() || p.type.future ||
                      std::find(ret.begin(), ret.end(), p.name) != ret.end();
    CHECK(deleted[p.name] == (keep ? 0 : 1));
    if (keep) return;
    size_t after = last_use.count(p.name) ? last_use[p.name]
                   : defined_at.count(p.name) ? defined_at[p.name] : SIZE_MAX;
    size_t first_gap = after == SIZE_MAX ? 0 : after + 1;
    for (size_t k = first_gap; k < del_at[p.name]; ++k) CHECK(d.bsyms[k].op == OpId::Del);
  };
  for (const Proxy& a : d.args) check_value(a);
  for (const BoundSymbol& b : d.bsyms)
    for (const Proxy& p : b.outputs) check_value(p);
}

TEST_CASE("del on captured models frees everything it may, once", "[del]") {
  for (const char* model : {"mlp", "gpt2-tiny"}) {
    Trace t = captured(model);
    Trace d = insert_dels(t);
    check_dels(t, d);
    CHECK(insert_dels(d) == d);
    CHECK(parse_trace(print_trace(d)) == d);
  }
}

TEST_CASE("stats: collective bytes follow the ring formulas exactly", "[stats]") {
  Trace t;
  TraceBuilder b(t);
  b.add_arg(arg("t_w", {2, 4}, DistType::fully_sharded, "w"));
  b.add_arg(arg("g", {8, 4}));
  std::vector<std::string> outs;
  auto issue_and_wait = [&](OpId op, const char* x, const Attrs& attrs) {
    outs.push_back(b.emit1(OpId::Wait, {in(b.emit1(op, {in(x)}, attrs))}).name);
  };
  for (int64_t n : {2, 4}) {
    issue_and_wait(OpId::AllGather, "t_w", gather(n));
    issue_and_wait(OpId::ReduceScatter, "g", scatter(n));
    issue_and_wait(OpId::AllReduce, "g", reduce(n));
  }
  issue_and_wait(OpId::Broadcast, "g", group(4).set("root", int64_t{0}));
  t.returns = returns(outs);
  REQUIRE_NOTHROW(verify(t));

  const TraceStats s = trace_stats(t);
  const double shard = 2 * 4 * 4, full = 8 * 4 * 4;  // bytes of t_w and of g
  CHECK(s.of(OpId::AllGather).count == 2);
  CHECK(s.of(OpId::AllGather).bytes == (2 * shard) * 1 / 2 + (4 * shard) * 3 / 4);
  CHECK(s.of(OpId::ReduceScatter).count == 2);
  CHECK(s.of(OpId::ReduceScatter).bytes == full * 1 / 2 + full * 3 / 4);
  CHECK(s.of(OpId::AllReduce).count == 2);
  CHECK(s.of(OpId::AllReduce).bytes == 2 * full * 1 / 2 + 2 * full * 3 / 4);
  CHECK(s.of(OpId::Broadcast).count == 1);
  CHECK(s.of(OpId::Broadcast).bytes == full * 3 / 4);
  CHECK(s.collective_count == 7);
  CHECK(s.collective_bytes ==
        s.of(OpId::AllGather).bytes + s.of(OpId::ReduceScatter).bytes +
            s.of(OpId::AllReduce).bytes + s.of(OpId::Broadcast).bytes);
  CHECK(s.of(OpId::AllGather).bytes == 32 + 96);  // the same, worked by hand
  CHECK(s.of(OpId::AllReduce).bytes == 128 + 192);

  // Memory: futures count when issued, their waits add nothing; no del.
  CHECK(s.param_bytes == shard);
  CHECK(s.arg_bytes == shard + full);
  const double futures = 2 * shard + 4 * shard + full / 2 + full / 4 + full + full + full;
  CHECK(s.peak_live_bytes == s.arg_bytes + futures);
  CHECK_FALSE(s.has_dels);
  CHECK(stats_text(s).find("no-free upper bound") != std::string::npos);
  const auto j = nlohmann::json::parse(stats_json(s));
  CHECK(j["collectives"]["all_reduce"]["bytes"].get<double>() == 320);
  CHECK(j["collectives"]["all_gather"]["count"].get<int>() == 2);
  CHECK(j["memory"]["has_dels"] == false);
  // One entry per op with the issue trait, in op-table order, zero where none ran.
  const auto ordered = nlohmann::ordered_json::parse(stats_json(s));
  std::vector<std::string> kinds;
  for (const auto& [kind, entry] : ordered["collectives"].items()) kinds.push_back(kind);
  CHECK(kinds == std::vector<std::string>{"all_gather", "reduce_scatter", "all_reduce", "broadcast"});
  CHECK(j["point_to_point"]["send"]["count"].get<int>() == 0);
  CHECK(j["point_to_point"]["recv"]["bytes"].get<double>() == 0);
  CHECK(stats_text(s).find("point to point") == std::string::npos);
}

TEST_CASE("stats: peak live bytes follow del", "[stats]") {
  Trace t;
  TraceBuilder b(t);
  b.add_arg(arg("x", {4}));           // 16 bytes
  b.add_arg(arg("t_w", {4}, DistType::none, "w"));
  Proxy t0 = b.emit1(OpId::Mul, {in("x"), in("t_w")});
  Proxy t1 = b.emit1(OpId::Reshape, {in(t0)}, {{"shape", IntList{2, 2}}});
  Proxy t2 = b.emit1(OpId::Sum, {in(t1)}, {{"dims", IntList{0, 1}}});  // 4 bytes
  t.returns = returns({t2.name});
  Trace d = insert_dels(t);
  // x, t_w | +t0 (48) del x (32) | +t1 (48) del t0 (32) | +t2 (36) del t1 (20)
  const TraceStats s = trace_stats(d);
  CHECK(s.has_dels);
  CHECK(s.arg_bytes == 32);
  CHECK(s.param_bytes == 16);
  CHECK(s.peak_live_bytes == 48);
  CHECK(s.peak_statement == 1);
  CHECK(s.end_live_bytes == 20);
  const TraceStats none = trace_stats(t);
  CHECK(none.peak_live_bytes == 32 + 16 + 16 + 4);
  CHECK(none.peak_statement == 3);
  CHECK(stats_text(s).find("no-free") == std::string::npos);
  CHECK(stats_text(s).find("after statement 1") != std::string::npos);
}

TEST_CASE("stats: gpt2-tiny peaks lower with dels than without", "[stats]") {
  Trace t = captured("gpt2-tiny");
  const TraceStats before = trace_stats(t);
  const TraceStats after = trace_stats(insert_dels(t));
  int64_t all = before.arg_bytes;
  for (const BoundSymbol& b : t.bsyms)
    for (const Proxy& p : b.outputs) all += bytes(p.type);
  CHECK(before.peak_live_bytes == all);  // nothing freed: the sum of every buffer
  CHECK(after.peak_live_bytes < before.peak_live_bytes);
  CHECK(after.peak_live_bytes >= after.arg_bytes);
  CHECK(after.param_bytes == before.param_bytes);
  CHECK(after.collective_count == 0);
  // At the end only the returned values and the parameters are left.
  int64_t kept = after.param_bytes;
  std::vector<std::string> ret;
  t.returns.collect_names(ret);
  for (const BoundSymbol& b : t.bsyms)
    for (const Proxy& p : b.outputs)
      if (std::find(ret.begin(), ret.end(), p.name) != ret.end()) kept += bytes(p.type);
  CHECK(after.end_live_bytes == kept);
}
