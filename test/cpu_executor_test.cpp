// The CPU executor against the float64 reference executor: every op on
// random shapes (empty and size-1 dims included) to 1e-5 relative for f32 and
// exactly for integers and bools, then the mlp and gpt2-tiny (forward, and
// forward+backward from the grad pass) through a small test-only trace runner
// (test/cpu_check.h). bf16: cpu_bf16_test.cpp.
#include <catch2/catch.hpp>

#include <iterator>
#include <numeric>

#include "frontend/models/registry.h"
#include "ir/error.h"
#include "passes/grad.h"
#include "test/cpu_check.h"
#include "test/op_samples.h"

using namespace fsdpc;
using namespace fsdpc::test;
using Catch::Contains;

// ---------------------------------------------------------------- elementwise

TEST_CASE("cpu: unary elementwise ops", "[cpu]") {
  Rng r;
  for (OpId op : test::elementwise_ops(ElementwiseKind::unary))
    for (int i = 0; i < kShapes; ++i) {
      Shape s = i == 0 ? Shape{1000} : r.shape(0, 4);  // 1000: past the oneDNN threshold
      const bool needs_positive = test::op_sample(op).domain(0) == test::Domain::positive;
      check_op(op, {needs_positive ? r.positive(s) : r.tensor(s, DType::f32, 3.0)});
    }
  for (DType d : {DType::i32, DType::i64}) check_op(OpId::Neg, {r.tensor(r.shape(0, 3), d)});
}

TEST_CASE("cpu: convert_element_type between f32, f64, i32, i64 and bool", "[cpu]") {
  Rng r;
  const DType all[] = {DType::f32, DType::f64, DType::i32, DType::i64, DType::boolean};
  for (DType from : all)
    for (DType to : all)
      for (int i = 0; i < 3; ++i) {
        Arg x = r.tensor(r.shape(0, 3), from, 4.0);
        if (i == 0 && !x.data.empty()) x.data[0] = is_float(from) ? -2.75 : 0.0;  // truncation toward zero
        check_op(OpId::ConvertElementType, {x}, Attrs{{"dtype", std::string(dtype_name(to))}});
      }
}

TEST_CASE("cpu: binary arithmetic with tensors and scalar literals", "[cpu]") {
  Rng r;
  for (OpId op : test::elementwise_ops(ElementwiseKind::binary))
    for (int i = 0; i < kShapes; ++i) {
      const Shape s = r.shape(0, 4);
      auto operand = [&](size_t k) {
        return test::op_sample(op).domain(k) == test::Domain::positive ? r.positive(s, 0.5, 2.0) : r.tensor(s);
      };
      const double c = op == OpId::Pow ? std::vector<double>{2.0, 3.0, 0.5, -1.5, 1.0}[i % 5] : 1.75;
      Arg b = operand(1);
      check_op(op, {operand(0), b});
      check_op(op, {operand(0), scalar(c)});
      if (op != OpId::Pow) check_op(op, {scalar(c), b});
    }
  for (DType d : {DType::i32, DType::i64})
    for (OpId op : {OpId::Add, OpId::Sub, OpId::Mul, OpId::Maximum}) {
      const Shape s = r.shape(0, 3);
      check_op(op, {r.tensor(s, d), r.tensor(s, d)});
      check_op(op, {r.tensor(s, d), scalar(3.0)});
    }
}

TEST_CASE("cpu: maximum lets NaN win, as torch.maximum", "[cpu]") {
  const double nan = std::nan("");
  check_op(OpId::Maximum, {Arg{tt({4}), {nan, 1.0, 2.0, nan}, {}}, Arg{tt({4}), {0.0, nan, 1.0, nan}, {}}});
}

TEST_CASE("cpu: comparisons over every operand dtype", "[cpu]") {
  Rng r;
  for (OpId op : test::elementwise_ops(ElementwiseKind::compare))
    for (DType d : {DType::f32, DType::f64, DType::i32, DType::i64, DType::boolean}) {
      if (d == DType::boolean && op != OpId::Eq && op != OpId::Ne) continue;
      for (int i = 0; i < 3; ++i) {
        const Shape s = r.shape(0, 3);
        Arg a = r.tensor(s, d), b = r.tensor(s, d);
        for (double& x : a.data) x = std::round(x);  // equal pairs happen
        for (double& x : b.data) x = std::round(x);
        check_op(op, {a, b});
        check_op(op, {a, scalar(d == DType::boolean ? 1.0 : 0.0)});
        check_op(op, {scalar(1.0), b});
      }
    }
}

TEST_CASE("cpu: where with tensor and scalar branches", "[cpu]") {
  Rng r;
  for (DType d : {DType::f32, DType::i64, DType::i32, DType::boolean})
    for (int i = 0; i < 4; ++i) {
      const Shape s = r.shape(0, 4);
      const Arg cond = r.tensor(s, DType::boolean);
      check_op(OpId::Where, {cond, r.tensor(s, d), r.tensor(s, d)});
      check_op(OpId::Where, {cond, r.tensor(s, d), scalar(0.0)});
      check_op(OpId::Where, {cond, scalar(1.0), r.tensor(s, d)});
    }
}

// ---------------------------------------------------------------- reductions

TEST_CASE("cpu: sum and amax over any dims", "[cpu]") {
  Rng r;
  for (OpId op : {OpId::Sum, OpId::Amax})
    for (int i = 0; i < 3 * kShapes; ++i) {
      Shape s = i == 0 ? Shape{3, 5000} : r.shape(0, 4);
      IntList dims = i == 0 ? IntList{1} : r.subset(static_cast<int64_t>(s.size()));
      check_op(op, {r.tensor(s, DType::f32, 2.0)}, Attrs{{"dims", dims}});
    }
  const double nan = std::nan("");
  check_op(OpId::Amax, {Arg{tt({2, 3}), {1.0, nan, 0.0, 2.0, 3.0, -1.0}, {}}}, Attrs{{"dims", IntList{1}}});
}

// ---------------------------------------------------------------- shape ops

TEST_CASE("cpu: reshape, permute and broadcast_in_dim", "[cpu]") {
  Rng r;
  for (int i = 0; i < kShapes; ++i) {
    DType d = i % 3 == 0 ? DType::i64 : DType::f32;
    const Shape s = r.shape(0, 4);
    Shape to(s.rbegin(), s.rend());
    to.insert(to.begin() + r.uniform_int(0, static_cast<int64_t>(to.size())), 1);
    check_op(OpId::Reshape, {r.tensor(s, d)}, Attrs{{"shape", IntList(to)}});

    IntList perm(s.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), r.gen);
    check_op(OpId::Permute, {r.tensor(s, d)}, Attrs{{"dims", perm}});

    const int64_t out_rank = static_cast<int64_t>(s.size()) + r.uniform_int(0, 2);
    IntList all(out_rank), bd;
    std::iota(all.begin(), all.end(), 0);
    std::sample(all.begin(), all.end(), std::back_inserter(bd), s.size(), r.gen);
    Shape out(out_rank);
    for (int64_t& o : out) o = r.dim();
    for (size_t k = 0; k < s.size(); ++k)
      if (s[k] != 1) out[bd[k]] = s[k];
    check_op(OpId::BroadcastInDim, {r.tensor(s, d)}, Attrs{{"shape", IntList(out)}, {"broadcast_dims", bd}});
  }
  // A big transpose takes the tiled path; a bias row broadcast the memcpy path.
  check_op(OpId::Permute, {r.tensor({67, 45})}, Attrs{{"dims", IntList{1, 0}}});
  check_op(OpId::Permute, {r.tensor({3, 40, 5, 33})}, Attrs{{"dims", IntList{0, 2, 1, 3}}});
  check_op(OpId::BroadcastInDim, {r.tensor({70})},
           Attrs{{"shape", IntList{4, 3, 70}}, {"broadcast_dims", IntList{2}}});
}

TEST_CASE("cpu: slice, pad (with interior) and cat", "[cpu]") {
  Rng r;
  for (int i = 0; i < 2 * kShapes; ++i) {
    const DType d = i % 4 == 0 ? DType::boolean : DType::f32;
    const Shape s = r.shape(1, 4);
    IntList starts, ends, steps, lo, hi, interior;
    for (int64_t e : s) {
      starts.push_back(r.uniform_int(0, e));
      ends.push_back(r.uniform_int(starts.back(), e));
      steps.push_back(r.uniform_int(1, 3));
      lo.push_back(r.uniform_int(0, 2));
      hi.push_back(r.uniform_int(0, 2));
      interior.push_back(r.uniform_int(0, 2));
    }
    check_op(OpId::Slice, {r.tensor(s, d)}, Attrs{{"starts", starts}, {"ends", ends}, {"strides", steps}});
    Attrs pad{{"lo", lo}, {"hi", hi}, {"value", d == DType::boolean ? 1.0 : -0.5}};
    check_op(OpId::Pad, {r.tensor(s, d)}, pad);
    check_op(OpId::Pad, {r.tensor(s, d)}, pad.set("interior", interior));

    const int64_t dim = r.uniform_int(0, static_cast<int64_t>(s.size()) - 1);
    std::vector<Arg> parts;
    for (int64_t k = r.uniform_int(1, 4); k > 0; --k) {
      Shape p = s;
      p[dim] = r.dim();
      parts.push_back(r.tensor(p, d));
    }
    check_op(OpId::Cat, parts, Attrs{{"dim", dim}});
  }
}

TEST_CASE("cpu: take and index_add with i32 and i64 indices", "[cpu]") {
  Rng r;
  for (int i = 0; i < 2 * kShapes; ++i) {
    const DType idx_type = i % 2 ? DType::i32 : DType::i64;
    const DType d = i % 3 == 0 ? DType::i64 : DType::f32;
    Shape s = r.shape(1, 3);
    const int64_t dim = r.uniform_int(0, static_cast<int64_t>(s.size()) - 1);
    s[dim] = std::max<int64_t>(s[dim], 1);
    auto indices = [&](Shape is) {
      Arg a = r.tensor(std::move(is), idx_type);
      for (double& x : a.data) x = static_cast<double>(r.uniform_int(0, s[dim] - 1));  // repeats happen
      return a;
    };
    check_op(OpId::Take, {r.tensor(s, d), indices(r.shape(0, 2))}, Attrs{{"dim", dim}});
    const Arg idx = indices({r.dim()});
    Shape src = s;
    src[dim] = idx.type.shape[0];
    check_op(OpId::IndexAdd, {r.tensor(s, d), idx, r.tensor(src, d)}, Attrs{{"dim", dim}});
  }
}

TEST_CASE("cpu: take and index_add reject an index outside the table", "[cpu]") {
  for (OpId op : {OpId::Take, OpId::IndexAdd}) {
    Trace t;
    TraceBuilder b(t);
    b.add_arg(Proxy{"a", tt({5, 4}), "", true});
    b.add_arg(Proxy{"idx", tt({3}, DType::i64), "", true});
    std::vector<Operand> ins{Operand::of("a"), Operand::of("idx")};
    if (op == OpId::IndexAdd) {
      b.add_arg(Proxy{"src", tt({3, 4}), "", true});
      ins.push_back(Operand::of("src"));
    }
    t.returns = ReturnTree::leaf(b.emit1(op, ins, Attrs{{"dim", int64_t{0}}}).name);
    std::vector<Value> args{reference::make_value(tt({5, 4}), Data(20, 1.0)),
                            reference::make_value(tt({3}, DType::i64), {0, 7, 1})};
    if (op == OpId::IndexAdd) args.push_back(reference::make_value(tt({3, 4}), Data(12, 1.0)));
    CHECK_THROWS_WITH(CpuRunner().run(t, args),
                      Contains(std::string(op_name(op)) + ": index 7 at position 1") && Contains("5 entries"));
  }
}

// ---------------------------------------------------------------- matmul, creation, buffers

TEST_CASE("cpu: matmul 2-D, batched, and with a shared 2-D right operand", "[cpu]") {
  Rng r;
  for (int i = 0; i < 3 * kShapes; ++i) {
    const int64_t m = r.dim(), k = i % 7 == 0 ? 0 : r.dim(), n = r.dim();
    const Shape batch = r.shape(0, 2);
    Shape a = batch, b = batch;
    a.insert(a.end(), {m, k});
    b.insert(b.end(), {k, n});
    check_op(OpId::Matmul, {r.tensor(a), r.tensor(b)});
    check_op(OpId::Matmul, {r.tensor(a), r.tensor({k, n})});
  }
  check_op(OpId::Matmul, {r.tensor({2, 65, 130}), r.tensor({130, 97})});
  // 512 rows and more: the right operand is packed into oneDNN's layout first.
  check_op(OpId::Matmul, {r.tensor({2, 300, 40}), r.tensor({40, 33})});
  check_op(OpId::Matmul, {r.tensor({2, 520, 24}), r.tensor({2, 24, 17})});
}

TEST_CASE("cpu: full and iota", "[cpu]") {
  Rng r;
  for (DType d : {DType::f32, DType::f64, DType::i32, DType::i64, DType::boolean})
    for (int i = 0; i < 4; ++i) {
      const Attrs attrs{{"shape", IntList(r.shape(0, 3))},
                        {"value", i == 0 ? 0.0 : -2.5},
                        {"dtype", std::string(dtype_name(d))},
                        {"device", std::string("cpu")}};
      check_op(OpId::Full, {}, attrs);
      if (d != DType::boolean)
        check_op(OpId::Iota, {},
                 Attrs{{"length", r.uniform_int(0, 100)}, {"dtype", std::string(dtype_name(d))},
                       {"device", std::string("cpu")}});
    }
}

TEST_CASE("cpu: pack flattens and unpack splits", "[cpu]") {
  Rng r;
  for (DType d : {DType::f32, DType::i64, DType::boolean})
    for (int i = 0; i < 4; ++i) {
      std::vector<Arg> parts;
      IntLists shapes;
      int64_t total = 0;
      for (int64_t k = r.uniform_int(1, 3); k > 0; --k) {
        parts.push_back(r.tensor(r.shape(0, 3), d));
        shapes.push_back(IntList(parts.back().type.shape));
        total += numel(parts.back().type.shape);
      }
      check_op(OpId::Pack, parts);
      check_op(OpId::Unpack, {r.tensor({total}, d)}, Attrs{{"shapes", shapes}});
    }
}

// ---------------------------------------------------------------- composites

TEST_CASE("cpu: linear with and without bias", "[cpu]") {
  Rng r;
  for (int i = 0; i < 2 * kShapes; ++i) {
    const int64_t in = i % 9 == 0 ? 0 : r.dim(), out = r.dim();
    Shape x = r.shape(0, 2);
    x.push_back(in);
    check_op(OpId::Linear, {r.tensor(x), r.tensor({out, in})});
    check_op(OpId::Linear, {r.tensor(x), r.tensor({out, in}), r.tensor({out})});
  }
  check_op(OpId::Linear, {r.tensor({3, 50, 96}), r.tensor({130, 96}), r.tensor({130})});
  check_op(OpId::Linear, {r.tensor({3, 200, 48}), r.tensor({70, 48}), r.tensor({70})});  // packed
}

TEST_CASE("cpu: gelu and softmax", "[cpu]") {
  Rng r;
  for (int i = 0; i < kShapes; ++i) {
    check_op(OpId::Gelu, {r.tensor(i == 0 ? Shape{1000} : r.shape(0, 4), DType::f32, 3.0)},
             Attrs{{"approximate", std::string("tanh")}});
    const Shape s = i == 0 ? Shape{7, 3000} : r.shape(1, 4);
    const int64_t dim = i == 0 ? 1 : r.uniform_int(0, static_cast<int64_t>(s.size()) - 1);
    check_op(OpId::Softmax, {r.tensor(s, DType::f32, 4.0)}, Attrs{{"dim", dim}});
  }
}

TEST_CASE("cpu: silu, and rms_norm also of rows far from zero", "[cpu]") {
  Rng r;
  for (int i = 0; i < kShapes; ++i) check_op(OpId::Silu, {r.tensor(r.shape(0, 4), DType::f32, 8.0)});
  for (int i = 0; i < 2 * kShapes; ++i) {
    Shape s = r.shape(0, 2);
    s.push_back(i == 0 ? 768 : r.dim());
    Arg x = r.tensor(s);
    if (i % 3 == 1)
      for (double& v : x.data) v = static_cast<float>(v + 50.0);
    check_op(OpId::RmsNorm, {x, r.tensor({s.back()})}, Attrs{{"eps", 1e-6}});
  }
}

TEST_CASE("cpu: layer_norm, also of rows far from zero", "[cpu]") {
  Rng r;
  for (int i = 0; i < 2 * kShapes; ++i) {
    Shape s = r.shape(0, 2);
    s.push_back(i == 0 ? 768 : r.dim());
    Arg x = r.tensor(s);
    if (i % 3 == 1)
      for (double& v : x.data) v = static_cast<float>(v + 50.0);  // needs a two-pass variance
    const Shape c{s.back()};
    check_op(OpId::LayerNorm, {x, r.tensor(c), r.tensor(c)}, Attrs{{"eps", 1e-5}});
  }
}

TEST_CASE("cpu: scaled_dot_product_attention, causal and not", "[cpu]") {
  Rng r;
  for (int i = 0; i < 2 * kShapes; ++i) {
    const Shape batch = r.shape(0, 2);
    const int64_t tq = r.dim(), tk = i == 0 ? 0 : r.dim(), d = r.dim(false), dv = r.dim();
    auto with = [&](int64_t a, int64_t b) {
      Shape s = batch;
      s.insert(s.end(), {a, b});
      return r.tensor(s);
    };
    const Attrs attrs{{"is_causal", i % 2 == 0}, {"scale", r.uniform(0.1, 1.0)}};
    check_op(OpId::ScaledDotProductAttention, {with(tq, d), with(tk, d), with(tk, dv)}, attrs);
  }
  // Causal attention runs in blocks of 128 query rows, each stopping at its
  // last visible key; 530 rows of a head also pack their operands.
  for (auto [tq, tk] : {std::pair<int64_t, int64_t>{70, 70}, {530, 530}, {200, 150}, {150, 300}})
    for (bool causal : {true, false})
      check_op(OpId::ScaledDotProductAttention,
               {r.tensor({2, 1, tq, 16}), r.tensor({2, 1, tk, 16}), r.tensor({2, 1, tk, 8})},
               Attrs{{"is_causal", causal}, {"scale", 0.25}});
}

TEST_CASE("cpu: cross_entropy with i32 and i64 targets", "[cpu]") {
  Rng r;
  for (int i = 0; i < 2 * kShapes; ++i) {
    Shape rows = r.shape(0, 2);
    Shape s = rows;
    s.push_back(i == 0 ? 5000 : r.dim(false));
    Arg targets = r.tensor(rows, i % 2 ? DType::i32 : DType::i64);
    for (double& t : targets.data) t = static_cast<double>(r.uniform_int(0, s.back() - 1));
    check_op(OpId::CrossEntropy, {r.tensor(s, DType::f32, 3.0), targets});
  }
}

TEST_CASE("cpu: cross_entropy rejects a target outside the classes", "[cpu]") {
  Trace t;
  TraceBuilder b(t, TraceBuilder::Options{false});
  b.add_arg(Proxy{"z", tt({2, 3}), "", true});
  b.add_arg(Proxy{"y", tt({2}, DType::i64), "", true});
  t.returns = ReturnTree::leaf(b.emit1(OpId::CrossEntropy, {Operand::of("z"), Operand::of("y")}).name);
  const std::vector<Value> args{reference::make_value(tt({2, 3}), Data(6, 0.0)),
                                reference::make_value(tt({2}, DType::i64), {0, 3})};
  CHECK_THROWS_WITH(CpuRunner().run(t, args), Contains("target 3 at position 1") && Contains("3 classes"));
}

// ---------------------------------------------------------------- claims

TEST_CASE("cpu: claims compute ops of supported dtypes, never communication", "[cpu]") {
  auto bsym = [](OpId op, DType d, DeviceKind device = DeviceKind::cpu, bool future = false) {
    BoundSymbol b;
    b.op = op;
    Proxy p{"t0", tt({2, 2}, d), "", true};
    p.type.device.kind = device;
    p.type.future = future;
    b.outputs.push_back(p);
    return b;
  };
  const Executor& cpu = cpu_executor();
  CHECK(cpu.name() == "cpu");
  for (OpId op : {OpId::Linear, OpId::LayerNorm, OpId::ScaledDotProductAttention, OpId::CrossEntropy, OpId::Gelu,
                  OpId::Silu, OpId::RmsNorm, OpId::Softmax, OpId::Matmul, OpId::Exp, OpId::Sum, OpId::Pad, OpId::Take, OpId::Pack})
    CHECK(cpu.claims(bsym(op, DType::f32)));
  CHECK(cpu.claims(bsym(OpId::Lt, DType::boolean)));
  CHECK(cpu.claims(bsym(OpId::ConvertElementType, DType::f64)));
  CHECK(cpu.claims(bsym(OpId::Iota, DType::i64)));
  CHECK(cpu.claims(bsym(OpId::Where, DType::boolean)));
  for (OpId op : {OpId::Synchronize, OpId::AllGather, OpId::ReduceScatter, OpId::AllReduce, OpId::Broadcast,
                  OpId::Wait})
    CHECK_FALSE(cpu.claims(bsym(op, DType::f32)));
  BoundSymbol del;
  del.op = OpId::Del;
  CHECK_FALSE(cpu.claims(del));
  CHECK_FALSE(cpu.claims(bsym(OpId::Exp, DType::f16)));      // no f16 math: decompose or report
  for (OpId op : {OpId::Linear, OpId::Matmul, OpId::ScaledDotProductAttention, OpId::Exp, OpId::Sum, OpId::Softmax,
                  OpId::Take, OpId::Full, OpId::IndexAdd})
    CHECK(cpu.claims(bsym(op, DType::bf16)));  // cpu_bf16_test.cpp runs them
  CHECK_FALSE(cpu.claims(bsym(OpId::Matmul, DType::i64)));
  CHECK_FALSE(cpu.claims(bsym(OpId::Exp, DType::f32, DeviceKind::cuda)));
  CHECK_FALSE(cpu.claims(bsym(OpId::Exp, DType::f32, DeviceKind::cpu, true)));
  const int threads = cpu_threads();  // the rank's cores: cpu_threads_test checks the count
  CHECK(cpu_backend_info().find(std::to_string(threads) + (threads == 1 ? " thread)" : " threads)")) != std::string::npos);
}

// ---------------------------------------------------------------- models

namespace {

// Random weights normal(0, 0.02) (layer-norm weights 1 + that), inputs
// normal(0, 1), tokens uniform over the vocabulary; all exact in f32, so
// both executors start from the same numbers.
std::vector<Value> model_args(const Trace& t, int64_t vocab) {
  Rng r;
  std::vector<Value> args;
  for (const Proxy& p : t.args) {
    const int64_t n = numel(p.type.shape);
    Data d = r.values(p.type.dtype, n, p.is_param() ? 0.02 : 1.0);
    if (is_integer(p.type.dtype))
      for (double& x : d) x = static_cast<double>(r.uniform_int(0, vocab - 1));
    if (p.param_path.find("ln") != std::string::npos && p.param_path.ends_with(".weight"))
      for (double& x : d) x = static_cast<float>(1.0 + x);
    args.push_back(reference::make_value(p.type, std::move(d)));
  }
  return args;
}

// The first output (the loss, or the mlp's output) to rtol, with composites
// run whole and decomposed; with `backward`, the joint trace of the grad pass
// and every parameter gradient too (f32 sums: a tenth of the largest entry).
void check_model(const std::string& name, int64_t vocab, double rtol, double floor, bool backward = false) {
  const Trace forward = capture(*make_model(name));
  const Trace t = backward ? grad(forward) : forward;
  std::vector<Value> args = model_args(t, vocab);
  if (backward) args.back() = reference::make_value(args.back().type, Data(numel(args.back().type.shape), 1.0));
  const std::vector<Value> want = reference::run(t, args);
  for (bool decompose : {false, true}) {
    INFO(name << (decompose ? " with every composite decomposed" : " with composites run whole")
              << (backward ? ", forward and backward" : ""));
    const std::vector<Value> got = CpuRunner(decompose).run(t, args);
    REQUIRE(got.size() == want.size());
    check_close(got[0], want[0], rtol, floor);
    for (size_t i = 1; i < got.size(); ++i) check_close(got[i], want[i], rtol, 0.1);
  }
}

}  // namespace

TEST_CASE("cpu: the mlp forward matches the reference", "[cpu][model]") { check_model("mlp", 0, 1e-5, 0.1); }

TEST_CASE("cpu: the gpt2-tiny forward loss matches the reference to 1e-4", "[cpu][model]") {
  check_model("gpt2-tiny", 256, 1e-4, 1e-6);  // the loss: a plain relative error
}

TEST_CASE("cpu: gpt2-tiny forward and backward match the reference", "[cpu][model]") {
  check_model("gpt2-tiny", 256, 1e-4, 1e-6, /*backward=*/true);
}
