// Hand-built traces shared by the printer/parser and JSON/DOT tests. Built by
// filling the IR structs directly, so these tests do not depend on meta
// functions or TraceBuilder.
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ir/trace.h"

namespace fsdpc::samples {

inline Proxy value(std::string name, Shape shape, DType dtype = DType::f32,
                   DistType dist = DistType::none, bool future = false) {
  Proxy p;
  p.name = std::move(name);
  p.type.shape = std::move(shape);
  p.type.dtype = dtype;
  p.type.dist = dist;
  p.type.future = future;
  return p;
}

inline Proxy param(std::string name, Shape shape, std::string path, bool requires_grad = true,
                   DistType dist = DistType::none) {
  Proxy p = value(std::move(name), std::move(shape), DType::f32, dist);
  p.param_path = std::move(path);
  p.requires_grad = requires_grad;
  return p;
}

inline BoundSymbol bsym(OpId op, std::vector<Operand> inputs, Attrs attrs,
                        std::vector<Proxy> outputs, std::vector<BoundSymbol> subs = {}) {
  BoundSymbol b;
  b.op = op;
  b.inputs = std::move(inputs);
  b.attrs = std::move(attrs);
  b.outputs = std::move(outputs);
  b.subsymbols = std::move(subs);
  return b;
}

inline Operand in(std::string name) { return Operand::of(std::move(name)); }
inline Operand lit(double v) { return Operand::lit(v); }
inline ReturnTree leaf(std::string n) { return ReturnTree::leaf(std::move(n)); }
inline ReturnTree tuple(std::vector<ReturnTree> items) {
  return ReturnTree::tuple(std::move(items));
}

// The example of the task description; its text is pinned in the tests.
inline Trace small_trace() {
  Trace t;
  t.provenance = "trace";
  t.args = {value("x", {64, 64}), param("t_0_weight", {64, 64}, "0.weight"),
            param("t_2_weight", {32, 64}, "2.weight", false, DistType::fully_sharded)};
  t.bsyms.push_back(bsym(
      OpId::Linear, {in("x"), in("t_0_weight")}, {}, {value("t0", {64, 64})},
      {bsym(OpId::Permute, {in("t_0_weight")}, {{"dims", IntList{1, 0}}}, {value("t1", {64, 64})}),
       bsym(OpId::Matmul, {in("x"), in("t1")}, {}, {value("t0", {64, 64})})}));
  t.bsyms.push_back(bsym(OpId::Mul, {in("t0"), lit(0.5)}, {}, {value("t2", {64, 64})}));
  t.bsyms.push_back(bsym(OpId::AllGather, {in("t_2_weight")},
                         {{"group", std::string("dp")}, {"size", int64_t{2}}, {"dim", int64_t{0}}},
                         {value("ft3", {64, 64}, DType::f32, DistType::replicated, true)}));
  t.bsyms.push_back(bsym(OpId::Unpack, {in("t9")}, {{"shapes", IntLists{{2, 3}, {4}}}},
                         {value("t4", {2, 3}), value("t5", {4})}));
  t.returns = leaf("t2");
  t.resync_counter();
  return t;
}

// Every attribute kind, odd scalars, devices, dtypes, quoted strings and
// paths, zero-output ops, two levels of sub-symbols, nested returns. A NaN
// attribute never compares equal (Attrs::operator== compares doubles), so
// tests of operator== leave it out.
inline Trace rich_trace(bool nan_attr = true) {
  const double inf = std::numeric_limits<double>::infinity();
  Trace t;
  t.name = "forward";
  t.provenance = "fsdp (zero3)";
  Proxy y = value("y", {8}, DType::bf16);
  y.type.device = Device{DeviceKind::cuda, 1};
  t.args = {value("x", {2, 8}), y, value("idx", {}, DType::i64, DistType::replicated),
            param("t_h_0_w", {4, 8}, "h.0 \"odd\"\\path\n", false, DistType::fully_sharded),
            param("t_b", {8}, "b", true, DistType::replicated)};
  Attrs every{{"i", int64_t{-7}},
              {"d", 2.0},
              {"tiny", 1e-05},
              {"big", 1e20},
              {"ninf", -inf},
              {"nan", std::nan("")},
              {"yes", true},
              {"no", false},
              {"s", std::string("dp")},
              {"q", std::string("a b, \"c\" # d\\e\tf\ng")},
              {"kw", std::string("True")},
              {"kinf", std::string("inf")},
              {"empty", std::string("")},
              {"ints", IntList{1, -2, 3}},
              {"none", IntList{}},
              {"lists", IntLists{{}, {1}, {2, 3}}}};
  if (!nan_attr) every.set("nan", 0.25);
  t.bsyms.push_back(bsym(OpId::Pad, {in("x")}, every, {value("t0", {2, 8})}));
  t.bsyms.push_back(bsym(OpId::Add, {in("t0"), lit(-inf)}, {}, {value("t1", {2, 8})}));
  t.bsyms.push_back(bsym(OpId::Mul, {lit(std::nan("")), in("t1")}, {}, {value("t2", {2, 8})}));
  t.bsyms.push_back(bsym(OpId::Sub, {in("t2"), lit(1e-05)}, {}, {value("t3", {2, 8})}));
  t.bsyms.push_back(bsym(OpId::Div, {in("t3"), lit(2.0)}, {}, {value("t4", {2, 8})}));
  t.bsyms.push_back(bsym(OpId::Unpack, {in("t4")}, {{"shapes", IntList{}}}, {}));
  // softmax > (amax, sub > (neg, add)), exp: two levels of sub-symbols.
  BoundSymbol sub = bsym(OpId::Sub, {in("t4"), in("t6")}, {}, {value("t7", {2, 8})},
                         {bsym(OpId::Neg, {in("t6")}, {}, {value("t8", {2, 8})}),
                          bsym(OpId::Add, {in("t4"), in("t8")}, {}, {value("t7", {2, 8})})});
  t.bsyms.push_back(
      bsym(OpId::Softmax, {in("t4")}, {{"dim", int64_t{1}}}, {value("t5", {2, 8})},
           {bsym(OpId::Amax, {in("t4")}, {{"dims", IntList{1}}}, {value("t6", {2, 8})}), sub,
            bsym(OpId::Exp, {in("t7")}, {}, {value("t5", {2, 8})})}));
  t.bsyms.push_back(bsym(OpId::ReduceScatter, {in("t5")},
                         {{"group", std::string("shard")},
                          {"size", int64_t{2}},
                          {"dim", int64_t{0}},
                          {"op", std::string("sum")}},
                         {value("ft9", {1, 8}, DType::f32, DistType::fully_sharded, true)}));
  t.bsyms.push_back(bsym(OpId::Wait, {in("ft9")}, {},
                         {value("t10", {1, 8}, DType::f32, DistType::fully_sharded)}));
  t.bsyms.push_back(bsym(OpId::Unpack, {in("t_b")}, {{"shapes", IntLists{{2, 2}, {4}}}},
                         {value("t11", {2, 2}, DType::f32, DistType::replicated),
                          value("t12", {4}, DType::f32, DistType::replicated)}));
  t.bsyms.push_back(bsym(OpId::Cat, {in("t11"), in("t11"), in("t11")}, {{"dim", int64_t{0}}},
                         {value("t13", {6, 2})}));
  t.returns = tuple({leaf("x"), tuple({leaf("t10")}), tuple({}),
                     tuple({tuple({leaf("t12"), leaf("t13")}), leaf("t5")})});
  t.resync_counter();
  return t;
}

}  // namespace fsdpc::samples
