// The reference executor is the oracle every other executor and every
// gradient check is measured against, so its own answers are pinned here by
// hand: each op on small non-square inputs, the composites against their
// decompositions, the models end to end, and the simulated collectives per rank.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "executors/reference/reference.h"
#include "frontend/models/registry.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "passes/fsdp.h"

using namespace fsdpc;
using namespace fsdpc::reference;
using Catch::Contains;
using Data = std::vector<double>;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TensorType tt(Shape shape, DType dtype = DType::f32, DistType dist = DistType::none) {
  TensorType t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  t.dist = dist;
  return t;
}

Attrs dims_attr(const std::string& key, IntList v) { return Attrs{{key, std::move(v)}}; }

// A trace under construction plus one argument value per trace argument.
struct Prog {
  Trace trace;
  TraceBuilder b;
  std::vector<Value> args;

  explicit Prog(bool decompositions = true)
      : b(trace, TraceBuilder::Options{decompositions}) {}

  Operand arg(const std::string& name, Shape shape, Data data, DType dtype = DType::f32,
              DistType dist = DistType::none) {
    TensorType t = tt(std::move(shape), dtype, dist);
    b.add_arg(Proxy{name, t, "", true});
    args.push_back(make_value(t, std::move(data)));
    return Operand::of(name);
  }
  Operand emit(OpId op, std::vector<Operand> ins, Attrs attrs = {}) {
    return Operand::of(b.emit1(op, std::move(ins), std::move(attrs)).name);
  }
  std::vector<Value> run_all(const std::vector<Operand>& outs) {
    std::vector<ReturnTree> leaves;
    for (const Operand& o : outs) leaves.push_back(ReturnTree::leaf(o.name));
    trace.returns = ReturnTree::tuple(std::move(leaves));
    return run(trace, args);
  }
  Value run1(const Operand& out) { return run_all({out})[0]; }
};

// One op applied to the given operands of a fresh single-input program.
Value unary(OpId op, Shape shape, Data data, Attrs attrs = {}, DType dtype = DType::f32) {
  Prog p;
  Operand x = p.arg("x", std::move(shape), std::move(data), dtype);
  return p.run1(p.emit(op, {x}, std::move(attrs)));
}

void check_close(const Value& got, const Value& want, double tol = 1e-12) {
  REQUIRE(got.type.shape == want.type.shape);
  REQUIRE(got.data.size() == want.data.size());
  for (size_t i = 0; i < got.data.size(); ++i) {
    INFO("element " << i << ": got " << got.data[i] << ", want " << want.data[i]);
    CHECK(std::abs(got.data[i] - want.data[i]) <= tol * (1.0 + std::abs(want.data[i])));
  }
}

Data normal_data(std::mt19937_64& rng, int64_t n, double stddev = 1.0) {
  std::normal_distribution<double> dist(0.0, stddev);
  Data d(n);
  for (double& v : d) v = dist(rng);
  return d;
}

Data random_ints(std::mt19937_64& rng, int64_t n, int64_t hi) {
  std::uniform_int_distribution<int64_t> dist(0, hi - 1);
  Data d(n);
  for (double& v : d) v = static_cast<double>(dist(rng));
  return d;
}

}  // namespace

// ---------------------------------------------------------------- elementwise

TEST_CASE("unary elementwise ops follow the C++ math library", "[reference]") {
  const Data x = {0.25, 1.0, 2.0, 9.0, 0.5, 4.0};
  auto each = [&](double (*f)(double)) {
    Data d;
    for (double v : x) d.push_back(f(v));
    return d;
  };
  CHECK(unary(OpId::Neg, {2, 3}, x).data == Data{-0.25, -1, -2, -9, -0.5, -4});
  CHECK(unary(OpId::Exp, {2, 3}, x).data == each([](double v) { return std::exp(v); }));
  CHECK(unary(OpId::Log, {2, 3}, x).data == each([](double v) { return std::log(v); }));
  CHECK(unary(OpId::Tanh, {2, 3}, x).data == each([](double v) { return std::tanh(v); }));
  CHECK(unary(OpId::Sin, {2, 3}, x).data == each([](double v) { return std::sin(v); }));
  CHECK(unary(OpId::Cos, {2, 3}, x).data == each([](double v) { return std::cos(v); }));
  CHECK(unary(OpId::Sqrt, {2, 3}, x).data == Data{0.5, 1, std::sqrt(2.0), 3, std::sqrt(0.5), 2});
  CHECK(unary(OpId::Rsqrt, {2, 3}, x).data == Data{2, 1, 1 / std::sqrt(2.0), 1.0 / 3, 1 / std::sqrt(0.5), 0.5});
  Value n = unary(OpId::Neg, {3}, {1, -2, 0}, {}, DType::i64);
  CHECK(n.type.dtype == DType::i64);
  CHECK(n.data == Data{-1, 2, 0});
}

TEST_CASE("binary elementwise ops take a scalar literal on either side", "[reference]") {
  Prog p;
  Operand a = p.arg("a", {2, 2}, {1, -2, 3, 4});
  Operand b = p.arg("b", {2, 2}, {2, 2, -1, 0.5});
  auto v = p.run_all({p.emit(OpId::Add, {a, b}), p.emit(OpId::Sub, {a, b}), p.emit(OpId::Mul, {a, b}),
                      p.emit(OpId::Div, {a, b}), p.emit(OpId::Pow, {a, b}), p.emit(OpId::Maximum, {a, b}),
                      p.emit(OpId::Sub, {Operand::lit(10), a}), p.emit(OpId::Div, {a, Operand::lit(4)}),
                      p.emit(OpId::Pow, {Operand::lit(2), b})});
  CHECK(v[0].data == Data{3, 0, 2, 4.5});
  CHECK(v[1].data == Data{-1, -4, 4, 3.5});
  CHECK(v[2].data == Data{2, -4, -3, 2});
  CHECK(v[3].data == Data{0.5, -1, -3, 8});
  CHECK(v[4].data == Data{1, 4, 1.0 / 3, 2});
  CHECK(v[5].data == Data{2, 2, 3, 4});
  CHECK(v[6].data == Data{9, 12, 7, 6});
  CHECK(v[7].data == Data{0.25, -0.5, 0.75, 1});
  CHECK(v[8].data == Data{4, 4, 0.5, std::sqrt(2.0)});
  CHECK(v[0].type == tt({2, 2}));
}

TEST_CASE("maximum propagates NaN as torch.maximum does", "[reference]") {
  Prog p;
  Operand a = p.arg("a", {3}, {std::nan(""), 1, -kInf});
  Value v = p.run1(p.emit(OpId::Maximum, {a, Operand::lit(0)}));
  CHECK(std::isnan(v.data[0]));
  CHECK(v.data[1] == 1);
  CHECK(v.data[2] == 0);
}

TEST_CASE("integer arithmetic truncates toward zero", "[reference]") {
  Prog p;
  Operand a = p.arg("a", {4}, {7, -7, 6, -1}, DType::i64);
  auto v = p.run_all({p.emit(OpId::Div, {a, Operand::lit(2)}), p.emit(OpId::Mul, {a, Operand::lit(3)})});
  CHECK(v[0].data == Data{3, -3, 3, 0});
  CHECK(v[0].type.dtype == DType::i64);
  CHECK(v[1].data == Data{21, -21, 18, -3});
}

TEST_CASE("comparisons give 0 and 1 of dtype bool", "[reference]") {
  Prog p;
  Operand a = p.arg("a", {1, 3}, {1, 2, 3});
  Operand b = p.arg("b", {1, 3}, {2, 2, 2});
  auto v = p.run_all({p.emit(OpId::Eq, {a, b}), p.emit(OpId::Ne, {a, b}), p.emit(OpId::Lt, {a, b}),
                      p.emit(OpId::Le, {a, b}), p.emit(OpId::Gt, {a, b}), p.emit(OpId::Ge, {a, b}),
                      p.emit(OpId::Lt, {Operand::lit(1.5), a})});
  CHECK(v[0].data == Data{0, 1, 0});
  CHECK(v[1].data == Data{1, 0, 1});
  CHECK(v[2].data == Data{1, 0, 0});
  CHECK(v[3].data == Data{1, 1, 0});
  CHECK(v[4].data == Data{0, 0, 1});
  CHECK(v[5].data == Data{0, 1, 1});
  CHECK(v[6].data == Data{0, 1, 1});
  CHECK(v[0].type.dtype == DType::boolean);
}

TEST_CASE("where picks per element, a literal on either side", "[reference]") {
  Prog p;
  Operand c = p.arg("c", {2, 2}, {1, 0, 0, 1}, DType::boolean);
  Operand a = p.arg("a", {2, 2}, {1, 2, 3, 4});
  Operand b = p.arg("b", {2, 2}, {-1, -2, -3, -4});
  auto v = p.run_all({p.emit(OpId::Where, {c, a, b}), p.emit(OpId::Where, {c, a, Operand::lit(-kInf)}),
                      p.emit(OpId::Where, {c, Operand::lit(9), b})});
  CHECK(v[0].data == Data{1, -2, -3, 4});
  CHECK(v[1].data == Data{1, -kInf, -kInf, 4});
  CHECK(v[2].data == Data{9, -2, -3, 9});
}

TEST_CASE("convert_element_type truncates to integers and keeps floats in float64", "[reference]") {
  auto to = [](DType d) { return Attrs{{"dtype", std::string(dtype_name(d))}}; };
  const Data x = {-1.7, 2.9, 0.0, 0.1};
  Value i = unary(OpId::ConvertElementType, {4}, x, to(DType::i64));
  CHECK(i.type.dtype == DType::i64);
  CHECK(i.data == Data{-1, 2, 0, 0});
  CHECK(unary(OpId::ConvertElementType, {4}, x, to(DType::i32)).data == Data{-1, 2, 0, 0});
  CHECK(unary(OpId::ConvertElementType, {4}, x, to(DType::boolean)).data == Data{1, 1, 0, 1});
  CHECK(unary(OpId::ConvertElementType, {4}, x, to(DType::bf16)).data == x);  // no rounding
  CHECK(unary(OpId::ConvertElementType, {2}, {1, 0}, to(DType::f32), DType::boolean).data == Data{1, 0});
}

// ----------------------------------------------------------------- reductions

TEST_CASE("sum and amax reduce the listed dims", "[reference]") {
  Data x(24);
  for (int i = 0; i < 24; ++i) x[i] = i;  // x[i][j][k] = 12i + 4j + k, shape [2, 3, 4]
  Value s02 = unary(OpId::Sum, {2, 3, 4}, x, dims_attr("dims", {0, 2}));
  CHECK(s02.type.shape == Shape{3});
  CHECK(s02.data == Data{60, 92, 124});  // sum over i, k of 12i + 4j + k
  Value s1 = unary(OpId::Sum, {2, 3, 4}, x, dims_attr("dims", {1}));
  CHECK(s1.data == Data{12, 15, 18, 21, 48, 51, 54, 57});
  CHECK(unary(OpId::Sum, {2, 3, 4}, x, dims_attr("dims", {0, 1, 2})).data == Data{276});
  CHECK(unary(OpId::Sum, {2, 3}, {1, 2, 3, 4, 5, 6}, dims_attr("dims", {})).data == Data{1, 2, 3, 4, 5, 6});
  Value m = unary(OpId::Amax, {2, 3}, {1, 7, -2, -5, -4, -9}, dims_attr("dims", {1}));
  CHECK(m.data == Data{7, -4});
  CHECK(unary(OpId::Amax, {2, 3}, {1, 7, -2, -5, -4, -9}, dims_attr("dims", {0})).data == Data{1, 7, -2});
}

TEST_CASE("amax over an empty dim is -inf", "[reference]") {
  Value m = unary(OpId::Amax, {2, 0}, {}, dims_attr("dims", {1}));
  CHECK(m.data == Data{-kInf, -kInf});
  CHECK(unary(OpId::Sum, {2, 0}, {}, dims_attr("dims", {1})).data == Data{0, 0});
}

// ---------------------------------------------------------------------- shape

TEST_CASE("reshape keeps row-major order; permute moves dims", "[reference]") {
  Data x(24);
  for (int i = 0; i < 24; ++i) x[i] = i;
  Value r = unary(OpId::Reshape, {2, 3, 4}, x, dims_attr("shape", {4, 6}));
  CHECK(r.type.shape == Shape{4, 6});
  CHECK(r.data == x);
  Value t = unary(OpId::Permute, {2, 3}, {1, 2, 3, 4, 5, 6}, dims_attr("dims", {1, 0}));
  CHECK(t.type.shape == Shape{3, 2});
  CHECK(t.data == Data{1, 4, 2, 5, 3, 6});
  // out[k][i][j] = x[i][j][k] = 12i + 4j + k
  Value p = unary(OpId::Permute, {2, 3, 4}, x, dims_attr("dims", {2, 0, 1}));
  REQUIRE(p.type.shape == Shape{4, 2, 3});
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) CHECK(p.data[k * 6 + i * 3 + j] == 12 * i + 4 * j + k);
}

TEST_CASE("broadcast_in_dim repeats size-1 and missing dims", "[reference]") {
  auto bcast = [](Shape in, Data d, IntList shape, IntList dims) {
    return unary(OpId::BroadcastInDim, std::move(in), std::move(d),
                 Attrs{{"shape", std::move(shape)}, {"broadcast_dims", std::move(dims)}});
  };
  CHECK(bcast({3}, {1, 2, 3}, {2, 3}, {1}).data == Data{1, 2, 3, 1, 2, 3});
  CHECK(bcast({2}, {1, 2}, {2, 3}, {0}).data == Data{1, 1, 1, 2, 2, 2});
  CHECK(bcast({2, 1}, {1, 2}, {2, 3}, {0, 1}).data == Data{1, 1, 1, 2, 2, 2});
  CHECK(bcast({}, {5}, {2, 2}, {}).data == Data{5, 5, 5, 5});
  Value v = bcast({2, 1, 3}, {1, 2, 3, 4, 5, 6}, {2, 2, 2, 3}, {1, 2, 3});
  CHECK(v.data == Data{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6, 1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6});
}

TEST_CASE("slice honours starts, ends and strides", "[reference]") {
  Data x(20);
  for (int i = 0; i < 20; ++i) x[i] = i;  // [4, 5]: x[i][j] = 5i + j
  Value s = unary(OpId::Slice, {4, 5}, x,
                  Attrs{{"starts", IntList{1, 0}}, {"ends", IntList{4, 5}}, {"strides", IntList{2, 2}}});
  CHECK(s.type.shape == Shape{2, 3});
  CHECK(s.data == Data{5, 7, 9, 15, 17, 19});
  Value t = unary(OpId::Slice, {4, 5}, x,
                  Attrs{{"starts", IntList{0, 1}}, {"ends", IntList{4, 4}}, {"strides", IntList{3, 1}}});
  CHECK(t.data == Data{1, 2, 3, 16, 17, 18});
  Value e = unary(OpId::Slice, {4, 5}, x,
                  Attrs{{"starts", IntList{2, 2}}, {"ends", IntList{2, 5}}, {"strides", IntList{1, 1}}});
  CHECK(e.type.shape == Shape{0, 3});
}

TEST_CASE("pad adds lo and hi with the value", "[reference]") {
  Value v = unary(OpId::Pad, {2, 3}, {1, 2, 3, 4, 5, 6},
                  Attrs{{"lo", IntList{1, 0}}, {"hi", IntList{0, 2}}, {"value", -1.0}});
  REQUIRE(v.type.shape == Shape{3, 5});
  CHECK(v.data == Data{-1, -1, -1, -1, -1, 1, 2, 3, -1, -1, 4, 5, 6, -1, -1});
}

TEST_CASE("pad with an interior attribute spaces the elements out", "[reference]") {
  Value v = unary(OpId::Pad, {2, 3}, {1, 2, 3, 4, 5, 6},
                  Attrs{{"lo", IntList{0, 1}}, {"hi", IntList{1, 0}}, {"value", 0.0}, {"interior", IntList{1, 2}}});
  REQUIRE(v.type.shape == Shape{4, 8});  // rows 0+2+1*1+1, cols 1+3+2*2+0
  CHECK(v.data == Data{0, 1, 0, 0, 2, 0, 0, 3,  //
                       0, 0, 0, 0, 0, 0, 0, 0,  //
                       0, 4, 0, 0, 5, 0, 0, 6,  //
                       0, 0, 0, 0, 0, 0, 0, 0});
}

TEST_CASE("cat joins along any dim", "[reference]") {
  Prog p;
  Operand a = p.arg("a", {2, 1}, {1, 2});
  Operand b = p.arg("b", {2, 2}, {3, 4, 5, 6});
  Operand c = p.arg("c", {1, 2}, {7, 8});
  auto v = p.run_all({p.emit(OpId::Cat, {a, b, a}, Attrs{{"dim", int64_t{1}}}),
                      p.emit(OpId::Cat, {b, c}, Attrs{{"dim", int64_t{0}}})});
  CHECK(v[0].type.shape == Shape{2, 4});
  CHECK(v[0].data == Data{1, 3, 4, 1, 2, 5, 6, 2});
  CHECK(v[1].data == Data{3, 4, 5, 6, 7, 8});
}

// ------------------------------------------------------------------- indexing

TEST_CASE("take gathers rows along dim", "[reference]") {
  Prog p;
  Operand table = p.arg("table", {4, 2}, {0, 1, 10, 11, 20, 21, 30, 31});
  Operand idx = p.arg("idx", {2, 3}, {3, 0, 1, 1, 2, 3}, DType::i64);
  Operand m = p.arg("m", {2, 3}, {1, 2, 3, 4, 5, 6});
  Operand j = p.arg("j", {2}, {2, 0}, DType::i32);
  auto v = p.run_all({p.emit(OpId::Take, {table, idx}, Attrs{{"dim", int64_t{0}}}),
                      p.emit(OpId::Take, {m, j}, Attrs{{"dim", int64_t{1}}})});
  CHECK(v[0].type.shape == Shape{2, 3, 2});
  CHECK(v[0].data == Data{30, 31, 0, 1, 10, 11, 10, 11, 20, 21, 30, 31});
  CHECK(v[1].type.shape == Shape{2, 2});
  CHECK(v[1].data == Data{3, 1, 6, 4});
}

TEST_CASE("take rejects an index outside the table", "[reference]") {
  Prog p;
  Operand table = p.arg("table", {4, 2}, Data(8, 0.0));
  Operand idx = p.arg("idx", {3}, {0, 4, 1}, DType::i64);
  Operand out = p.emit(OpId::Take, {table, idx}, Attrs{{"dim", int64_t{0}}});
  CHECK_THROWS_AS(p.run1(out), Error);
  CHECK_THROWS_WITH(p.run1(out), Contains("index 4") && Contains("table of 4 entries"));
  p.args[1].data = {-1, 0, 0};
  CHECK_THROWS_WITH(p.run1(out), Contains("index -1"));
}

TEST_CASE("index_add scatters and accumulates repeated indices", "[reference]") {
  Prog p;
  Operand a = p.arg("a", {3, 2}, {1, 1, 1, 1, 1, 1});
  Operand idx = p.arg("idx", {4}, {2, 0, 2, 2}, DType::i64);
  Operand src = p.arg("src", {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Operand b = p.arg("b", {2, 3}, {0, 0, 0, 0, 0, 0});
  Operand j = p.arg("j", {2}, {1, 1}, DType::i32);
  Operand s2 = p.arg("s2", {2, 2}, {1, 2, 3, 4});
  auto v = p.run_all({p.emit(OpId::IndexAdd, {a, idx, src}, Attrs{{"dim", int64_t{0}}}),
                      p.emit(OpId::IndexAdd, {b, j, s2}, Attrs{{"dim", int64_t{1}}})});
  CHECK(v[0].data == Data{4, 5, 1, 1, 14, 17});
  CHECK(v[1].data == Data{0, 3, 0, 0, 7, 0});
  p.args[1].data = {0, 3, 0, 0};
  CHECK_THROWS_WITH(p.run_all({}), Contains("index 3") && Contains("table of 3 entries"));
}

// --------------------------------------------------------- matmul, creation

TEST_CASE("matmul: 2-D, batched, and a 2-D right operand shared by the batch", "[reference]") {
  Prog p;
  Operand a = p.arg("a", {2, 3}, {1, 2, 3, 4, 5, 6});
  Operand b = p.arg("b", {3, 2}, {1, 0, 0, 1, 1, 1});
  Operand ab = p.arg("ab", {2, 1, 3}, {1, 2, 3, -1, 0, 2});
  Operand bb = p.arg("bb", {2, 3, 2}, {1, 0, 0, 1, 1, 1, 2, 0, 0, 2, 1, -1});
  auto v = p.run_all({p.emit(OpId::Matmul, {a, b}), p.emit(OpId::Matmul, {ab, bb}),
                      p.emit(OpId::Matmul, {ab, b})});
  CHECK(v[0].type.shape == Shape{2, 2});
  CHECK(v[0].data == Data{4, 5, 10, 11});
  CHECK(v[1].type.shape == Shape{2, 1, 2});
  CHECK(v[1].data == Data{4, 5, 0, -2});
  CHECK(v[2].data == Data{4, 5, 1, 2});
}

TEST_CASE("full and iota create their values", "[reference]") {
  Prog p;
  auto full = [&](double value, DType d) {
    return p.emit(OpId::Full, {},
                  Attrs{{"shape", IntList{2, 3}}, {"value", value}, {"dtype", std::string(dtype_name(d))},
                        {"device", std::string("cpu")}});
  };
  auto iota = [&](int64_t n, DType d) {
    return p.emit(OpId::Iota, {},
                  Attrs{{"length", n}, {"dtype", std::string(dtype_name(d))}, {"device", std::string("cpu")}});
  };
  auto v = p.run_all({full(1.5, DType::f32), full(-2.7, DType::i64), iota(4, DType::i64), iota(0, DType::f32)});
  CHECK(v[0].data == Data(6, 1.5));
  CHECK(v[1].data == Data(6, -2.0));
  CHECK(v[1].type.dtype == DType::i64);
  CHECK(v[2].data == Data{0, 1, 2, 3});
  CHECK(v[3].data.empty());
}

TEST_CASE("pack flattens and unpack splits by shapes", "[reference]") {
  Prog p;
  Operand a = p.arg("a", {2, 2}, {1, 2, 3, 4});
  Operand b = p.arg("b", {3}, {5, 6, 7});
  Operand buf = p.emit(OpId::Pack, {a, b});
  auto parts = p.b.emit(OpId::Unpack, {buf}, Attrs{{"shapes", IntLists{{3}, {1, 2}, {2}}}});
  auto v = p.run_all({buf, Operand::of(parts[0].name), Operand::of(parts[1].name), Operand::of(parts[2].name)});
  CHECK(v[0].data == Data{1, 2, 3, 4, 5, 6, 7});
  CHECK(v[1].data == Data{1, 2, 3});
  CHECK(v[2].type.shape == Shape{1, 2});
  CHECK(v[2].data == Data{4, 5});
  CHECK(v[3].data == Data{6, 7});
}

TEST_CASE("del frees values; returns flatten the tree left to right", "[reference]") {
  Prog p;
  Operand x = p.arg("x", {2}, {1, 2});
  Operand y = p.emit(OpId::Mul, {x, Operand::lit(2)});
  Operand z = p.emit(OpId::Add, {y, Operand::lit(1)});
  p.b.emit(OpId::Del, {y});
  p.trace.returns = ReturnTree::tuple({ReturnTree::tuple({ReturnTree::leaf(z.name)}), ReturnTree::leaf("x")});
  auto v = run(p.trace, p.args);
  REQUIRE(v.size() == 2);
  CHECK(v[0].data == Data{3, 5});
  CHECK(v[1].data == Data{1, 2});
}

// ------------------------------------------------------------------- errors

TEST_CASE("arguments are checked for count and shape", "[reference]") {
  Prog p;
  p.arg("x", {64, 64}, Data(64 * 64, 0.0));
  Operand w = p.arg("t_0_weight", {32, 64}, Data(32 * 64, 0.0));
  p.trace.returns = ReturnTree::leaf(w.name);
  p.args[1] = make_value(tt({64, 64}), Data(64 * 64, 0.0));
  CHECK_THROWS_WITH(run(p.trace, p.args), "argument 2 (t_0_weight): expected f32[32, 64], got f32[64, 64]");
  CHECK_THROWS_WITH(run(p.trace, {p.args[0]}), Contains("takes 2 arguments (x, t_0_weight), got 1"));
  p.args[1] = make_value(tt({32, 64}, DType::f64), Data(32 * 64, 0.0));
  CHECK_THROWS_WITH(run(p.trace, p.args), Contains("expected f32[32, 64], got f64[32, 64]"));
  CHECK_THROWS_AS(make_value(tt({2, 2}), {1, 2, 3}), Error);
  CHECK_THROWS_WITH(run_spmd(p.trace, flat_mesh(2), {p.args}), Contains("1 argument lists for a mesh of 2"));
}

// ----------------------------------------------------------------- composites

namespace {

using TypedData = std::pair<TensorType, Data>;

// Runs one composite on the same inputs with and without its decomposition.
void check_direct_matches_decomposition(OpId op, const std::vector<TypedData>& ins,
                                        Attrs attrs) {
  std::vector<Value> results;
  for (bool decompose : {true, false}) {
    Prog p(decompose);
    std::vector<Operand> ops;
    for (size_t i = 0; i < ins.size(); ++i)
      ops.push_back(p.arg("in" + std::to_string(i), ins[i].first.shape, ins[i].second, ins[i].first.dtype));
    Operand out = p.emit(op, ops, attrs);
    CHECK(p.trace.bsyms.back().subsymbols.empty() == !decompose);
    results.push_back(p.run1(out));
  }
  check_close(results[1], results[0]);
}

}  // namespace

TEST_CASE("composites computed directly match their decompositions", "[reference]") {
  std::mt19937_64 rng(7);
  auto rnd = [&](Shape s, double sd = 1.0) { return TypedData{tt(s), normal_data(rng, numel(s), sd)}; };
  SECTION("linear") {
    check_direct_matches_decomposition(OpId::Linear, {rnd({2, 3, 5}), rnd({4, 5}), rnd({4})}, {});
    check_direct_matches_decomposition(OpId::Linear, {rnd({3, 5}), rnd({4, 5})}, {});
    check_direct_matches_decomposition(OpId::Linear, {rnd({5}), rnd({4, 5}), rnd({4})}, {});
  }
  SECTION("gelu") {
    check_direct_matches_decomposition(OpId::Gelu, {rnd({3, 7}, 3.0)}, Attrs{{"approximate", std::string("tanh")}});
  }
  SECTION("softmax over every dim") {
    for (int64_t d = 0; d < 3; ++d)
      check_direct_matches_decomposition(OpId::Softmax, {rnd({2, 3, 4}, 5.0)}, Attrs{{"dim", d}});
  }
  SECTION("layer_norm") {
    check_direct_matches_decomposition(OpId::LayerNorm, {rnd({2, 3, 5}, 2.0), rnd({5}), rnd({5})},
                                       Attrs{{"eps", 1e-5}});
  }
  SECTION("silu") {
    check_direct_matches_decomposition(OpId::Silu, {rnd({3, 7}, 5.0)}, {});
  }
  SECTION("rms_norm") {
    check_direct_matches_decomposition(OpId::RmsNorm, {rnd({2, 3, 5}, 2.0), rnd({5})}, Attrs{{"eps", 1e-6}});
    check_direct_matches_decomposition(OpId::RmsNorm, {rnd({4, 1}), rnd({1})}, Attrs{{"eps", 0.5}});
  }
  SECTION("scaled_dot_product_attention") {
    for (bool causal : {false, true}) {
      check_direct_matches_decomposition(OpId::ScaledDotProductAttention,
                                         {rnd({2, 3, 4, 5}), rnd({2, 3, 6, 5}), rnd({2, 3, 6, 7})},
                                         Attrs{{"is_causal", causal}, {"scale", 0.3}});
      check_direct_matches_decomposition(OpId::ScaledDotProductAttention,
                                         {rnd({5, 4}), rnd({5, 4}), rnd({5, 2})},
                                         Attrs{{"is_causal", causal}, {"scale", 0.5}});
    }
  }
  SECTION("cross_entropy") {
    check_direct_matches_decomposition(
        OpId::CrossEntropy, {rnd({2, 3, 7}, 3.0), TypedData{tt({2, 3}, DType::i64), random_ints(rng, 6, 7)}}, {});
    check_direct_matches_decomposition(
        OpId::CrossEntropy, {rnd({4, 5}), TypedData{tt({4}, DType::i32), random_ints(rng, 4, 5)}}, {});
  }
}

TEST_CASE("composites give the hand-computed values", "[reference]") {
  for (bool decompose : {true, false}) {
    INFO("decomposition recorded: " << decompose);
    Prog p(decompose);
    Operand x = p.arg("x", {2, 2}, {0, std::log(3.0), 1, 1});
    Operand ln_x = p.arg("ln_x", {1, 3}, {1, 2, 3});
    Operand w = p.arg("w", {3}, {1, 1, 2});
    Operand b = p.arg("b", {3}, {0, 0, 1});
    Operand lw = p.arg("lw", {2, 2}, {1, 2, 3, 4});
    Operand lb = p.arg("lb", {2}, {10, 20});
    Operand logits = p.arg("logits", {2, 4}, {0, 0, 0, 0, 0, 0, 0, 0});
    Operand targets = p.arg("targets", {2}, {3, 1}, DType::i64);
    Operand q = p.arg("q", {3, 1}, {1, 1, 1});
    Operand v = p.arg("v", {3, 2}, {1, 2, 3, 4, 5, 6});
    auto r = p.run_all({p.emit(OpId::Softmax, {x}, Attrs{{"dim", int64_t{1}}}),
                        p.emit(OpId::LayerNorm, {ln_x, w, b}, Attrs{{"eps", 0.0}}),
                        p.emit(OpId::Linear, {x, lw, lb}),
                        p.emit(OpId::CrossEntropy, {logits, targets}),
                        p.emit(OpId::ScaledDotProductAttention, {q, q, v}, Attrs{{"is_causal", true}, {"scale", 1.0}}),
                        p.emit(OpId::Gelu, {x}, Attrs{{"approximate", std::string("tanh")}})});
    check_close(r[0], make_value(tt({2, 2}), {0.25, 0.75, 0.5, 0.5}), 1e-15);
    const double s = std::sqrt(1.5);  // (x - 2) / sqrt(2/3)
    check_close(r[1], make_value(tt({1, 3}), {-s, 0, 2 * s + 1}), 1e-15);
    check_close(r[2], make_value(tt({2, 2}), {10 + 2 * std::log(3.0), 20 + 4 * std::log(3.0), 13, 27}), 1e-15);
    check_close(r[3], make_value(tt({}), {std::log(4.0)}), 1e-15);
    // Equal scores: query i averages the values of keys 0..i.
    check_close(r[4], make_value(tt({3, 2}), {1, 2, 2, 3, 3, 4}), 1e-15);
    const double g1 = 0.5 * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * 1.044715));
    CHECK(r[5].data[0] == 0.0);
    CHECK(r[5].data[2] == Approx(g1).epsilon(1e-15));
    CHECK(r[5].data[2] == Approx(0.8411919906082768).epsilon(1e-12));
  }
}

TEST_CASE("cross_entropy computed directly rejects a target outside the classes", "[reference]") {
  Prog p(false);
  Operand logits = p.arg("logits", {2, 3}, Data(6, 0.0));
  Operand targets = p.arg("targets", {2}, {0, 3}, DType::i64);
  CHECK_THROWS_WITH(p.run1(p.emit(OpId::CrossEntropy, {logits, targets})), Contains("target 3"));
}

// --------------------------------------------------------------------- models

namespace {

// GPT-2's initialisation: layer-norm weights 1, biases 0, other weights
// normal(0, 0.02); token ids and targets uniform over the vocabulary.
std::vector<Value> model_args(const Trace& t, uint64_t seed, int64_t vocab) {
  std::mt19937_64 rng(seed);
  std::vector<Value> args;
  for (const Proxy& p : t.args) {
    const int64_t n = numel(p.type.shape);
    Data d;
    const std::string& path = p.param_path;
    if (is_integer(p.type.dtype))
      d = random_ints(rng, n, vocab);
    else if (path.ends_with(".bias"))
      d = Data(n, 0.0);
    else if (path.ends_with(".weight") && path.find("ln_") != std::string::npos)
      d = Data(n, 1.0);
    else
      d = normal_data(rng, n, p.is_param() ? 0.02 : 1.0);
    args.push_back(make_value(p.type, std::move(d)));
  }
  return args;
}

Trace without_decompositions(Trace t) {
  for (BoundSymbol& b : t.bsyms) b.subsymbols.clear();
  return t;
}

}  // namespace

TEST_CASE("the mlp runs and matches a hand-written forward", "[reference][model]") {
  Trace t = capture(*make_model("mlp"));
  std::vector<Value> args = model_args(t, 1, 0);
  std::vector<Value> out = run(t, args);
  REQUIRE(out.size() == 1);
  REQUIRE(out[0].type.shape == Shape{64, 64});
  // y = tanh(x W0^T) W2^T
  const Data &x = args[0].data, &w0 = args[1].data, &w2 = args[2].data;
  Data h(64 * 64), y(64 * 64, 0.0);
  for (int i = 0; i < 64; ++i)
    for (int o = 0; o < 64; ++o) {
      double acc = 0;
      for (int k = 0; k < 64; ++k) acc += x[i * 64 + k] * w0[o * 64 + k];
      h[i * 64 + o] = std::tanh(acc);
    }
  for (int i = 0; i < 64; ++i)
    for (int o = 0; o < 64; ++o)
      for (int k = 0; k < 64; ++k) y[i * 64 + o] += h[i * 64 + k] * w2[o * 64 + k];
  check_close(out[0], make_value(out[0].type, y));
  check_close(run(without_decompositions(t), args)[0], out[0]);
}

TEST_CASE("gpt2-tiny at initialisation has a loss near log(vocab)", "[reference][model]") {
  Trace t = capture(*make_model("gpt2-tiny"));
  std::vector<Value> args = model_args(t, 2, 256);
  auto start = std::chrono::steady_clock::now();
  std::vector<Value> out = run(t, args);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(out.size() == 1);
  REQUIRE(out[0].type.shape == Shape{});
  const double loss = out[0].data[0];
  INFO("loss " << loss << ", forward " << seconds << " s");  // the time is reported, not tested
  CHECK(std::isfinite(loss));
  CHECK(std::abs(loss - std::log(256.0)) < 0.1);
  check_close(run(without_decompositions(t), args)[0], out[0], 1e-10);
}

// ---------------------------------------------------------------- collectives

namespace {

// x -> <collective> -> wait, returned; attrs name group, size and the rest.
Trace collective_trace(OpId op, Shape in_shape, Attrs attrs, DistType dist = DistType::none) {
  Trace t;
  TraceBuilder b(t);
  b.add_arg(Proxy{"x", tt(std::move(in_shape), DType::f32, dist), "", true});
  Proxy f = b.emit1(op, {Operand::of("x")}, std::move(attrs));
  Proxy w = b.emit1(OpId::Wait, {Operand::of(f.name)});
  t.returns = ReturnTree::leaf(w.name);
  return t;
}

Attrs group_attrs(const std::string& group, int64_t size) {
  return Attrs{{"group", group}, {"size", size}};
}

// Rank r's argument: its values from `values(r)`.
std::vector<Data> spmd_run(const Trace& t, const Mesh& mesh, const std::function<Data(int)>& values) {
  std::vector<std::vector<Value>> args;
  for (int r = 0; r < mesh.world(); ++r) args.push_back({make_value(t.args[0].type, values(r))});
  std::vector<std::vector<Value>> out = run_spmd(t, mesh, args);
  std::vector<Data> data;
  for (const auto& rank_out : out) {
    REQUIRE(rank_out.size() == 1);
    CHECK_FALSE(rank_out[0].type.future);
    data.push_back(rank_out[0].data);
  }
  return data;
}

}  // namespace

TEST_CASE("collectives on flat meshes of 1 to 4 ranks", "[reference][collective]") {
  for (int w = 1; w <= 4; ++w) {
    INFO("world " << w);
    const Mesh mesh = flat_mesh(w);
    const double ww = w;
    Attrs g = group_attrs("dp", w);

    Attrs ag0 = g;
    ag0.set("dim", int64_t{0});
    auto gathered = spmd_run(collective_trace(OpId::AllGather, {2}, ag0), mesh,
                             [](int r) { return Data{10.0 * r, 10.0 * r + 1}; });
    Data want0;
    for (int r = 0; r < w; ++r) want0.insert(want0.end(), {10.0 * r, 10.0 * r + 1});

    Attrs ag1 = g;
    ag1.set("dim", int64_t{1});
    auto gathered1 = spmd_run(collective_trace(OpId::AllGather, {2, 1}, ag1), mesh,
                              [](int r) { return Data{1.0 * r, 100.0 + r}; });
    Data want1;
    for (int r = 0; r < w; ++r) want1.push_back(r);
    for (int r = 0; r < w; ++r) want1.push_back(100 + r);

    Attrs rs = g;
    rs.set("dim", int64_t{0}).set("op", std::string("sum"));
    auto scattered = spmd_run(collective_trace(OpId::ReduceScatter, {2 * w}, rs), mesh, [w](int r) {
      Data d(2 * w);
      for (int i = 0; i < 2 * w; ++i) d[i] = 100.0 * r + i;
      return d;
    });

    Attrs ar = g;
    ar.set("op", std::string("sum"));
    auto reduced = spmd_run(collective_trace(OpId::AllReduce, {2}, ar), mesh,
                            [](int r) { return Data{1.0 * r, 1.0}; });

    Attrs bc = g;
    bc.set("root", int64_t{w - 1});
    auto bcast = spmd_run(collective_trace(OpId::Broadcast, {1}, bc), mesh,
                          [](int r) { return Data{7.0 + r}; });

    for (int r = 0; r < w; ++r) {
      INFO("rank " << r);
      CHECK(gathered[r] == want0);
      CHECK(gathered1[r] == want1);
      // sum over ranks of 100r + i, rank r keeping i = 2r, 2r + 1
      const double base = 100.0 * ww * (ww - 1) / 2;
      CHECK(scattered[r] == Data{base + ww * (2 * r), base + ww * (2 * r + 1)});
      CHECK(reduced[r] == Data{ww * (ww - 1) / 2, ww});
      CHECK(bcast[r] == Data{7.0 + w - 1});
    }
  }
}

TEST_CASE("collectives on a 2x2 mesh use dp, shard and replicate groups", "[reference][collective]") {
  const Mesh mesh{2, 2};  // ranks 0,1 = replica 0; 2,3 = replica 1
  auto x = [](int r) { return Data{1.0 + r}; };
  auto gather = [&](const std::string& group, int64_t size) {
    Attrs a = group_attrs(group, size);
    a.set("dim", int64_t{0});
    return spmd_run(collective_trace(OpId::AllGather, {1}, a), mesh, x);
  };
  CHECK(gather("dp", 4) == std::vector<Data>(4, Data{1, 2, 3, 4}));
  CHECK(gather("shard", 2) == std::vector<Data>{{1, 2}, {1, 2}, {3, 4}, {3, 4}});
  CHECK(gather("replicate", 2) == std::vector<Data>{{1, 3}, {2, 4}, {1, 3}, {2, 4}});

  Attrs ar = group_attrs("replicate", 2);
  ar.set("op", std::string("sum"));
  CHECK(spmd_run(collective_trace(OpId::AllReduce, {1}, ar), mesh, x) ==
        std::vector<Data>{{4}, {6}, {4}, {6}});

  Attrs bc = group_attrs("shard", 2);
  bc.set("root", int64_t{1});
  CHECK(spmd_run(collective_trace(OpId::Broadcast, {1}, bc), mesh, x) ==
        std::vector<Data>{{2}, {2}, {4}, {4}});

  Attrs rs = group_attrs("shard", 2);
  rs.set("dim", int64_t{0}).set("op", std::string("sum"));
  // Rank r holds [r, 10r]; each shard group sums its pair and splits it.
  CHECK(spmd_run(collective_trace(OpId::ReduceScatter, {2}, rs), mesh,
                 [](int r) { return Data{1.0 * r, 10.0 * r}; }) ==
        std::vector<Data>{{1}, {10}, {5}, {50}});
}

TEST_CASE("a collective whose size does not match its group is an error", "[reference][collective]") {
  Attrs a = group_attrs("dp", 2);
  a.set("dim", int64_t{0});
  Trace t = collective_trace(OpId::AllGather, {1}, a);
  std::vector<std::vector<Value>> args(4, {make_value(tt({1}), {0})});
  CHECK_THROWS_AS(run_spmd(t, flat_mesh(4), args), Error);
  CHECK_THROWS_WITH(run_spmd(t, flat_mesh(4), args),
                    Contains("group 'dp' has 4 ranks") && Contains("size=2"));
  Attrs s = group_attrs("shard", 4);
  s.set("op", std::string("sum"));
  CHECK_THROWS_WITH(run_spmd(collective_trace(OpId::AllReduce, {1}, s), Mesh{2, 2}, args),
                    Contains("group 'shard' has 2 ranks"));
}

TEST_CASE("un-lowered synchronize gathers shards and drops the padding", "[reference][collective]") {
  // A [3, 2] parameter over 2 ranks: 2 rows each, the last rank's second row padding.
  Attrs a = group_attrs("dp", 2);
  a.set("shape", IntList{3, 2});
  Trace t;
  TraceBuilder b(t);
  b.add_arg(Proxy{"w", tt({2, 2}, DType::f32, DistType::fully_sharded), "w", true});
  Proxy full = b.emit1(OpId::Synchronize, {Operand::of("w")}, a);
  t.returns = ReturnTree::leaf(full.name);
  auto out = run_spmd(t, flat_mesh(2), {{make_value(t.args[0].type, {1, 2, 3, 4})},
                                        {make_value(t.args[0].type, {5, 6, 0, 0})}});
  for (const auto& rank_out : out) {
    CHECK(rank_out[0].type.shape == Shape{3, 2});
    CHECK(rank_out[0].type.dist == DistType::replicated);
    CHECK(rank_out[0].data == Data{1, 2, 3, 4, 5, 6});
  }

  Trace rt;
  TraceBuilder rb(rt);
  rb.add_arg(Proxy{"w", tt({2}, DType::f32, DistType::replicated), "w", true});
  Proxy same = rb.emit1(OpId::Synchronize, {Operand::of("w")}, group_attrs("dp", 2));
  rt.returns = ReturnTree::leaf(same.name);
  auto rout = run_spmd(rt, flat_mesh(2), {{make_value(tt({2}), {1, 2})}, {make_value(tt({2}), {1, 2})}});
  CHECK(rout[1][0].data == Data{1, 2});
}

// ------------------------------------------------- sharded traces end to end

namespace {

// Rank `index`'s shard of a full value: rows [index*rows, (index+1)*rows) of
// dim 0, the rows past the end zero, as the sharding pass lays them out.
Value shard_of(const Value& full, const TensorType& shard_type, int64_t index) {
  const int64_t row = numel(full.type.shape) / full.type.shape[0];
  const int64_t rows = shard_type.shape[0];
  Data d(numel(shard_type.shape), 0.0);
  for (int64_t i = 0; i < rows * row; ++i) {
    const int64_t from = index * rows * row + i;
    if (from < static_cast<int64_t>(full.data.size())) d[i] = full.data[from];
  }
  return make_value(shard_type, std::move(d));
}

// Runs `model` unsharded on one rank and sharded by `strategy` on `mesh`;
// every rank must return what the single rank does.
void check_sharded_matches_unsharded(const std::string& model, Strategy strategy, const Mesh& mesh) {
  Trace t = capture(*make_model(model));
  std::vector<Value> full = model_args(t, 3, 256);
  std::vector<Value> want = run(t, full);
  Trace sharded = fsdp(t, FsdpOptions{strategy, mesh});
  int n_sharded = 0;
  for (const Proxy& p : sharded.args) n_sharded += p.type.dist == DistType::fully_sharded;
  CHECK((n_sharded > 0) == (strategy != Strategy::no_shard));
  std::vector<std::vector<Value>> args(mesh.world());
  for (int r = 0; r < mesh.world(); ++r)
    for (size_t i = 0; i < full.size(); ++i) {
      const TensorType& type = sharded.args[i].type;
      args[r].push_back(type.dist == DistType::fully_sharded ? shard_of(full[i], type, r % mesh.shards)
                                                              : make_value(type, full[i].data));
    }
  std::vector<std::vector<Value>> got = run_spmd(sharded, mesh, args);
  for (int r = 0; r < mesh.world(); ++r) {
    INFO("rank " << r);
    REQUIRE(got[r].size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) check_close(got[r][i], want[i], 1e-12);
  }
}

}  // namespace

TEST_CASE("fsdp-sharded models give the unsharded result on every rank", "[reference][collective][model]") {
  check_sharded_matches_unsharded("mlp", Strategy::zero3, flat_mesh(3));  // 64 rows: 22, 22, 20 + padding
  check_sharded_matches_unsharded("mlp", Strategy::no_shard, flat_mesh(2));
  check_sharded_matches_unsharded("gpt2-tiny", Strategy::hybrid, Mesh{2, 2});
}
