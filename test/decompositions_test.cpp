// Tests of the composites' decompositions: structure (prims only, SSA inside
// the composite, the meta's output type) and values, the decomposition run on
// the float64 reference executor and checked by hand.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numbers>
#include <set>
#include <string>
#include <vector>

#include "executors/reference/reference.h"
#include "executors/strided.h"
#include "ir/builder.h"
#include "ir/error.h"

using namespace fsdpc;

namespace {

// ---- building ----

TensorType tt(Shape shape, DType dtype = DType::f32, Device dev = {}) {
  TensorType t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  t.device = dev;
  return t;
}

struct Built {
  Trace trace;
  const BoundSymbol& comp() const { return trace.bsyms.back(); }
};

// One trace with the given arguments and a single composite applied to them.
Built build(const std::vector<std::pair<std::string, TensorType>>& args, OpId op,
            Attrs attrs = {}) {
  Built out;
  TraceBuilder b(out.trace);
  std::vector<Operand> ins;
  for (const auto& [name, type] : args) {
    b.add_arg(Proxy{name, type, "", true});
    ins.push_back(Operand::of(name));
  }
  out.trace.returns = ReturnTree::leaf(b.emit1(op, std::move(ins), std::move(attrs)).name);
  return out;
}

std::vector<OpId> ops_of(const BoundSymbol& c) {
  std::vector<OpId> ops;
  for (const BoundSymbol& s : c.subsymbols) ops.push_back(s.op);
  return ops;
}

int count(const BoundSymbol& c, OpId op) {
  auto ops = ops_of(c);
  return static_cast<int>(std::count(ops.begin(), ops.end(), op));
}

const BoundSymbol* first(const BoundSymbol& c, OpId op) {
  for (const BoundSymbol& s : c.subsymbols)
    if (s.op == op) return &s;
  return nullptr;
}

// What every decomposition must satisfy, whatever the composite.
void check_well_formed(const Built& built) {
  const BoundSymbol& c = built.comp();
  REQUIRE(built.trace.bsyms.size() == 1);
  REQUIRE(op_info(c.op).composite);
  REQUIRE(!c.subsymbols.empty());
  std::set<std::string> defined;
  for (const Operand& in : c.inputs) defined.insert(in.name);
  std::set<std::string> outputs;
  for (const BoundSymbol& s : c.subsymbols) {
    INFO("sub-symbol " << op_name(s.op));
    CHECK_FALSE(op_info(s.op).composite);
    CHECK(s.subsymbols.empty());
    for (const Operand& in : s.inputs)
      if (!in.is_scalar()) CHECK(defined.count(in.name) == 1);
    REQUIRE(s.outputs.size() == 1);
    CHECK(outputs.insert(s.outputs[0].name).second);  // defined once
    CHECK(s.outputs[0].type.dist == DistType::none);
    defined.insert(s.outputs[0].name);
  }
  const Proxy& last = c.subsymbols.back().outputs[0];
  CHECK(last.name == c.output().name);
  CHECK(last.type == c.output().type);
  for (const Proxy& a : built.trace.args) CHECK(outputs.count(a.name) == 0);
}

// ---- values ----

struct Value {
  Shape shape;
  std::vector<double> data;
};

// Runs the composite's decomposition on `inputs` (in its input order) on the
// float64 reference executor, which runs a composite's sub-symbols.
Value run(const Built& t, const std::vector<Value>& inputs) {
  REQUIRE(inputs.size() == t.trace.args.size());
  std::vector<reference::Value> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    REQUIRE(inputs[i].shape == t.trace.args[i].type.shape);
    args.push_back(reference::make_value(t.trace.args[i].type, inputs[i].data));
  }
  REQUIRE(!t.comp().subsymbols.empty());
  std::vector<reference::Value> out = reference::run(t.trace, args);
  return Value{out.at(0).type.shape, out.at(0).data};
}

// Deterministic, varied inputs.
Value filled(Shape shape, double seed) {
  Value v{std::move(shape), {}};
  for (int64_t i = 0; i < numel(v.shape); ++i)
    v.data.push_back(std::sin(seed + 1.7 * static_cast<double>(i)) * 2.0);
  return v;
}

double at(const Value& v, std::vector<int64_t> idx) {
  auto st = row_major_strides(v.shape);
  int64_t f = 0;
  for (size_t i = 0; i < idx.size(); ++i) f += idx[i] * st[i];
  return v.data[f];
}

}  // namespace

TEST_CASE("linear without bias is permute then matmul", "[decompositions]") {
  Built t = build({{"x", tt({4, 3})}, {"w", tt({5, 3})}}, OpId::Linear);
  check_well_formed(t);
  const BoundSymbol& c = t.comp();
  REQUIRE(ops_of(c) == std::vector<OpId>{OpId::Permute, OpId::Matmul});
  CHECK(c.subsymbols[0].attrs.get_ints("dims") == IntList{1, 0});
  CHECK(c.output().type.shape == Shape{4, 5});

  Value x = filled({4, 3}, 0.1), w = filled({5, 3}, 0.7);
  Value y = run(t, {x, w});
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      double ref = 0;
      for (int64_t p = 0; p < 3; ++p) ref += at(x, {i, p}) * at(w, {j, p});
      CHECK(at(y, {i, j}) == Approx(ref).margin(1e-12));
    }
}

TEST_CASE("linear with bias on a rank-3 input broadcasts the bias over the last dim",
          "[decompositions]") {
  Built t = build({{"x", tt({2, 4, 3})}, {"w", tt({5, 3})}, {"b", tt({5})}}, OpId::Linear);
  check_well_formed(t);
  const BoundSymbol& c = t.comp();
  REQUIRE(ops_of(c) ==
          std::vector<OpId>{OpId::Permute, OpId::Matmul, OpId::BroadcastInDim, OpId::Add});
  CHECK(c.subsymbols[2].attrs.get_ints("shape") == IntList{2, 4, 5});
  CHECK(c.subsymbols[2].attrs.get_ints("broadcast_dims") == IntList{2});

  Value x = filled({2, 4, 3}, 0.3), w = filled({5, 3}, 1.1), bias = filled({5}, 2.0);
  Value y = run(t, {x, w, bias});
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 5; ++j) {
        double ref = at(bias, {j});
        for (int64_t p = 0; p < 3; ++p) ref += at(x, {n, i, p}) * at(w, {j, p});
        CHECK(at(y, {n, i, j}) == Approx(ref).margin(1e-12));
      }
}

TEST_CASE("linear with bias on a rank-2 input", "[decompositions]") {
  Built t = build({{"x", tt({3, 2}, DType::f64)}, {"w", tt({4, 2}, DType::f64)},
                   {"b", tt({4}, DType::f64)}},
                  OpId::Linear);
  check_well_formed(t);
  CHECK(t.comp().output().type == tt({3, 4}, DType::f64));
  Value y = run(t, {Value{{3, 2}, {1, 2, 3, 4, 5, 6}}, Value{{4, 2}, {1, 0, 0, 1, 1, 1, 2, -1}},
                           Value{{4}, {10, 20, 30, 40}}});
  CHECK(y.data == std::vector<double>{11, 22, 33, 40, 13, 24, 37, 42, 15, 26, 41, 44});
}

TEST_CASE("linear on a 1-D input goes through a one-row matrix", "[decompositions]") {
  Built t = build({{"x", tt({2})}, {"w", tt({3, 2})}, {"b", tt({3})}}, OpId::Linear);
  check_well_formed(t);
  CHECK(t.comp().output().type.shape == Shape{3});
  CHECK(count(t.comp(), OpId::Reshape) == 2);
  Value y = run(t, {Value{{2}, {1, 2}}, Value{{3, 2}, {1, 0, 0, 1, 1, 1}}, Value{{3}, {0.5, 0, -1}}});
  CHECK(y.data == std::vector<double>{1.5, 2, 2});
}

TEST_CASE("gelu is the tanh approximation with scalar constants", "[decompositions]") {
  Built t = build({{"x", tt({5})}}, OpId::Gelu, Attrs{{"approximate", std::string("tanh")}});
  check_well_formed(t);
  const BoundSymbol& c = t.comp();
  CHECK(count(c, OpId::Tanh) == 1);
  bool has_beta = false, has_kappa = false;
  for (const BoundSymbol& s : c.subsymbols)
    for (const Operand& in : s.inputs)
      if (in.is_scalar()) {
        has_beta |= std::abs(*in.scalar - std::sqrt(2.0 / std::numbers::pi)) < 1e-15;
        has_kappa |= *in.scalar == 0.044715;
      }
  CHECK(has_beta);
  CHECK(has_kappa);

  // Values of torch.nn.functional.gelu(x, approximate='tanh') in float64.
  Value y = run(t, {Value{{5}, {1.0, -1.0, 2.0, -3.0, 0.0}}});
  CHECK(y.data[0] == Approx(0.8411919906082768).epsilon(1e-14));
  CHECK(y.data[1] == Approx(-0.15880800939172324).epsilon(1e-14));
  CHECK(y.data[2] == Approx(1.954597694087775).epsilon(1e-14));
  CHECK(y.data[3] == Approx(-0.0036373920817729943).epsilon(1e-12));
  CHECK(y.data[4] == 0.0);
}

TEST_CASE("softmax over a middle dim", "[decompositions]") {
  Built t = build({{"x", tt({2, 3, 4})}}, OpId::Softmax, Attrs{{"dim", int64_t{1}}});
  check_well_formed(t);
  const BoundSymbol& c = t.comp();
  REQUIRE(ops_of(c) == std::vector<OpId>{OpId::Amax, OpId::BroadcastInDim, OpId::Sub, OpId::Exp,
                                         OpId::Sum, OpId::BroadcastInDim, OpId::Div});
  CHECK(c.subsymbols[0].attrs.get_ints("dims") == IntList{1});
  CHECK(c.subsymbols[1].attrs.get_ints("broadcast_dims") == IntList{0, 2});
  CHECK(c.subsymbols[1].attrs.get_ints("shape") == IntList{2, 3, 4});
  CHECK(c.subsymbols[4].attrs.get_ints("dims") == IntList{1});

  Value x = filled({2, 3, 4}, 0.4);
  x.data[5] = 800.0;  // exp would overflow without the max shift
  Value y = run(t, {x});
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t k = 0; k < 4; ++k) {
      double total = 0, m = -INFINITY;
      for (int64_t j = 0; j < 3; ++j) m = std::max(m, at(x, {a, j, k}));
      for (int64_t j = 0; j < 3; ++j) total += std::exp(at(x, {a, j, k}) - m);
      double row = 0;
      for (int64_t j = 0; j < 3; ++j) {
        double p = at(y, {a, j, k});
        CHECK(std::isfinite(p));
        CHECK(p == Approx(std::exp(at(x, {a, j, k}) - m) / total).margin(1e-15));
        row += p;
      }
      CHECK(row == Approx(1.0).epsilon(1e-14));
    }
  CHECK(at(y, {0, 1, 1}) == Approx(1.0));  // the 800 dominates its column
}

TEST_CASE("layer_norm normalizes the last dim with a biased variance", "[decompositions]") {
  Built t = build({{"x", tt({2, 3, 6})}, {"w", tt({6})}, {"b", tt({6})}}, OpId::LayerNorm,
                  Attrs{{"eps", 1e-5}});
  check_well_formed(t);
  const BoundSymbol& c = t.comp();
  CHECK(count(c, OpId::Rsqrt) == 1);
  CHECK(count(c, OpId::Sum) == 2);
  for (const BoundSymbol& s : c.subsymbols) {
    if (s.op == OpId::Sum) CHECK(s.attrs.get_ints("dims") == IntList{2});
    CHECK(s.outputs[0].type.dtype == DType::f32);  // computed in the input dtype
  }

  Value x = filled({2, 3, 6}, 0.9);
  SECTION("identity affine: mean 0, variance 1 per row") {
    Value y = run(t, {x, Value{{6}, std::vector<double>(6, 1.0)}, Value{{6}, std::vector<double>(6, 0.0)}});
    for (int64_t r = 0; r < 6; ++r) {
      double mean = 0, var = 0;
      for (int64_t k = 0; k < 6; ++k) mean += y.data[r * 6 + k] / 6;
      for (int64_t k = 0; k < 6; ++k) var += (y.data[r * 6 + k] - mean) * (y.data[r * 6 + k] - mean) / 6;
      CHECK(mean == Approx(0.0).margin(1e-12));
      CHECK(var == Approx(1.0).epsilon(1e-4));  // eps keeps it just under 1
    }
  }
  SECTION("matches the formula with weight and bias") {
    Value w = filled({6}, 3.0), bias = filled({6}, 5.0);
    Value y = run(t, {x, w, bias});
    for (int64_t r = 0; r < 6; ++r) {
      double mean = 0, var = 0;
      for (int64_t k = 0; k < 6; ++k) mean += x.data[r * 6 + k] / 6;
      for (int64_t k = 0; k < 6; ++k) var += (x.data[r * 6 + k] - mean) * (x.data[r * 6 + k] - mean) / 6;
      for (int64_t k = 0; k < 6; ++k) {
        double ref = (x.data[r * 6 + k] - mean) / std::sqrt(var + 1e-5) * w.data[k] + bias.data[k];
        CHECK(y.data[r * 6 + k] == Approx(ref).margin(1e-12));
      }
    }
  }
}

TEST_CASE("rms_norm scales the last dim by its reciprocal root mean square, then by w", "[decompositions]") {
  for (DType dt : {DType::f32, DType::bf16}) {
    INFO(dtype_name(dt));
    Built t = build({{"x", tt({2, 3, 6}, dt)}, {"w", tt({6}, dt)}}, OpId::RmsNorm, Attrs{{"eps", 1e-6}});
    check_well_formed(t);
    const BoundSymbol& c = t.comp();
    CHECK(count(c, OpId::Rsqrt) == 1);
    CHECK(count(c, OpId::Sum) == 1);
    // bf16 is upcast to f32 and back (Hugging Face's statistics are f32); f32 is not converted.
    CHECK(count(c, OpId::ConvertElementType) == (dt == DType::f32 ? 0 : 2));
    for (const BoundSymbol& s : c.subsymbols)
      if (s.op == OpId::Sum) {
        CHECK(s.attrs.get_ints("dims") == IntList{2});
        CHECK(s.outputs[0].type.dtype == DType::f32);
      }
    const Value x = filled({2, 3, 6}, 0.9), w = filled({6}, 3.0);
    const Value y = run(t, {x, w});
    for (int64_t r = 0; r < 6; ++r) {
      double ms = 0;
      for (int64_t k = 0; k < 6; ++k) ms += x.data[r * 6 + k] * x.data[r * 6 + k] / 6;
      for (int64_t k = 0; k < 6; ++k)
        CHECK(y.data[r * 6 + k] == Approx(w.data[k] * x.data[r * 6 + k] / std::sqrt(ms + 1e-6)).margin(1e-12));
    }
  }
}

TEST_CASE("silu is x / (1 + exp(-x))", "[decompositions]") {
  Built t = build({{"x", tt({2, 5})}}, OpId::Silu, {});
  check_well_formed(t);
  const Value x = filled({2, 5}, 0.7);
  const Value y = run(t, {x});
  for (size_t i = 0; i < x.data.size(); ++i)
    CHECK(y.data[i] == Approx(x.data[i] / (1.0 + std::exp(-x.data[i]))).margin(1e-15));
}

namespace {

// Attention computed directly: softmax(q kᵀ · scale, masked) · v, for [B, T, D].
Value attention_ref(const Value& q, const Value& k, const Value& v, double scale, bool causal) {
  const int64_t nb = q.shape[0], tq = q.shape[1], d = q.shape[2], tk = k.shape[1], dv = v.shape[2];
  Value out{{nb, tq, dv}, std::vector<double>(nb * tq * dv, 0.0)};
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t i = 0; i < tq; ++i) {
      std::vector<double> s(tk, -INFINITY);
      double m = -INFINITY, total = 0;
      for (int64_t j = 0; j < tk; ++j) {
        if (causal && j > i) continue;
        s[j] = 0;
        for (int64_t p = 0; p < d; ++p) s[j] += at(q, {b, i, p}) * at(k, {b, j, p});
        s[j] *= scale;
        m = std::max(m, s[j]);
      }
      for (int64_t j = 0; j < tk; ++j) total += std::exp(s[j] - m);
      for (int64_t j = 0; j < tk; ++j)
        for (int64_t e = 0; e < dv; ++e)
          out.data[(b * tq + i) * dv + e] += std::exp(s[j] - m) / total * at(v, {b, j, e});
    }
  return out;
}

}  // namespace

TEST_CASE("scaled_dot_product_attention without a mask", "[decompositions]") {
  Built t = build({{"q", tt({2, 3, 4})}, {"k", tt({2, 5, 4})}, {"v", tt({2, 5, 6})}},
                  OpId::ScaledDotProductAttention, Attrs{{"is_causal", false}, {"scale", 0.5}});
  check_well_formed(t);
  const BoundSymbol& c = t.comp();
  CHECK(c.output().type.shape == Shape{2, 3, 6});
  CHECK(count(c, OpId::Iota) == 0);
  CHECK(count(c, OpId::Where) == 0);
  CHECK(count(c, OpId::Matmul) == 2);
  CHECK(c.subsymbols[0].op == OpId::Permute);
  CHECK(c.subsymbols[0].attrs.get_ints("dims") == IntList{0, 2, 1});

  Value q = filled({2, 3, 4}, 0.2), k = filled({2, 5, 4}, 1.3), v = filled({2, 5, 6}, 2.6);
  Value y = run(t, {q, k, v});
  Value ref = attention_ref(q, k, v, 0.5, false);
  for (size_t f = 0; f < ref.data.size(); ++f) CHECK(y.data[f] == Approx(ref.data[f]).margin(1e-12));
}

TEST_CASE("causal scaled_dot_product_attention masks later keys with -inf", "[decompositions]") {
  const Device cuda{DeviceKind::cuda, 0};
  Built t = build({{"q", tt({2, 3, 4}, DType::f32, cuda)}, {"k", tt({2, 5, 4}, DType::f32, cuda)},
                   {"v", tt({2, 5, 6}, DType::f32, cuda)}},
                  OpId::ScaledDotProductAttention, Attrs{{"is_causal", true}, {"scale", 0.5}});
  check_well_formed(t);
  const BoundSymbol& c = t.comp();
  CHECK(c.output().type == tt({2, 3, 6}, DType::f32, cuda));
  REQUIRE(count(c, OpId::Iota) == 2);
  for (const BoundSymbol& s : c.subsymbols)
    if (s.op == OpId::Iota) {
      CHECK(s.attrs.get_str("device") == "cuda:0");
      CHECK(s.attrs.get_dtype("dtype") == DType::i64);
    }
  REQUIRE(first(c, OpId::Ge) != nullptr);
  CHECK(first(c, OpId::Ge)->outputs[0].type.shape == Shape{3, 5});
  const BoundSymbol* where = first(c, OpId::Where);
  REQUIRE(where != nullptr);
  REQUIRE(where->inputs[2].is_scalar());
  CHECK(std::isinf(*where->inputs[2].scalar));
  CHECK(*where->inputs[2].scalar < 0);
  CHECK(count(c, OpId::Softmax) == 0);

  Value q = filled({2, 3, 4}, 0.2), k = filled({2, 5, 4}, 1.3), v = filled({2, 5, 6}, 2.6);
  Value y = run(t, {q, k, v});
  Value ref = attention_ref(q, k, v, 0.5, true);
  for (size_t f = 0; f < ref.data.size(); ++f) CHECK(y.data[f] == Approx(ref.data[f]).margin(1e-12));
  // The first query sees only the first key: its output is v's first row.
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t e = 0; e < 6; ++e) CHECK(at(y, {b, 0, e}) == Approx(at(v, {b, 0, e})).margin(1e-15));
}

TEST_CASE("causal attention on rank-4 inputs broadcasts the mask over batch and heads",
          "[decompositions]") {
  Built t = build({{"q", tt({1, 2, 4, 3})}, {"k", tt({1, 2, 4, 3})}, {"v", tt({1, 2, 4, 3})}},
                  OpId::ScaledDotProductAttention, Attrs{{"is_causal", true}, {"scale", 0.25}});
  check_well_formed(t);
  const BoundSymbol& c = t.comp();
  const BoundSymbol* ge = first(c, OpId::Ge);
  REQUIRE(ge != nullptr);
  bool found = false;
  for (const BoundSymbol& s : c.subsymbols)
    if (s.op == OpId::BroadcastInDim && s.inputs[0].name == ge->outputs[0].name) {
      CHECK(s.attrs.get_ints("broadcast_dims") == IntList{2, 3});
      CHECK(s.attrs.get_ints("shape") == IntList{1, 2, 4, 4});
      found = true;
    }
  CHECK(found);
  Value q = filled({1, 2, 4, 3}, 0.5), k = filled({1, 2, 4, 3}, 1.5), v = filled({1, 2, 4, 3}, 2.5);
  Value y = run(t, {q, k, v});
  Value ref = attention_ref(Value{{2, 4, 3}, q.data}, Value{{2, 4, 3}, k.data},
                            Value{{2, 4, 3}, v.data}, 0.25, true);
  for (size_t f = 0; f < ref.data.size(); ++f) CHECK(y.data[f] == Approx(ref.data[f]).margin(1e-12));
}

namespace {

// -mean over rows of log_softmax(logits)[row, target], computed directly.
double cross_entropy_ref(const Value& logits, const std::vector<double>& targets) {
  const int64_t v = logits.shape.back(), n = numel(logits.shape) / v;
  double total = 0;
  for (int64_t r = 0; r < n; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < v; ++j) m = std::max(m, logits.data[r * v + j]);
    for (int64_t j = 0; j < v; ++j) s += std::exp(logits.data[r * v + j] - m);
    total += logits.data[r * v + static_cast<int64_t>(targets[r])] - m - std::log(s);
  }
  return -total / static_cast<double>(n);
}

void check_cross_entropy_structure(const BoundSymbol& c, DType target_dtype, int64_t n) {
  CHECK(c.output().type.shape == Shape{});
  CHECK(c.output().type.dtype == DType::f32);
  REQUIRE(first(c, OpId::Eq) != nullptr);
  const BoundSymbol* conv = first(c, OpId::ConvertElementType);
  REQUIRE(conv != nullptr);
  CHECK(conv->attrs.get_dtype("dtype") == DType::f32);
  const BoundSymbol* iota = first(c, OpId::Iota);
  REQUIRE(iota != nullptr);
  CHECK(iota->attrs.get_dtype("dtype") == target_dtype);
  const BoundSymbol& last = c.subsymbols.back();
  CHECK(last.op == OpId::Div);
  REQUIRE(last.inputs[1].is_scalar());
  CHECK(*last.inputs[1].scalar == static_cast<double>(n));
  CHECK(c.subsymbols[c.subsymbols.size() - 2].op == OpId::Neg);
}

}  // namespace

TEST_CASE("cross_entropy on rank-2 logits with i64 targets", "[decompositions]") {
  Built t = build({{"logits", tt({4, 5})}, {"targets", tt({4}, DType::i64)}}, OpId::CrossEntropy);
  check_well_formed(t);
  const BoundSymbol& c = t.comp();
  check_cross_entropy_structure(c, DType::i64, 4);
  CHECK(count(c, OpId::Reshape) == 0);

  Value logits = filled({4, 5}, 0.8);
  logits.data[7] = 1000.0;  // stable log-softmax keeps this finite
  std::vector<double> targets{2, 0, 4, 1};
  Value loss = run(t, {logits, Value{{4}, targets}});
  REQUIRE(loss.shape == Shape{});
  CHECK(std::isfinite(loss.data[0]));
  CHECK(loss.data[0] == Approx(cross_entropy_ref(logits, targets)).epsilon(1e-13));
}

TEST_CASE("cross_entropy on rank-3 logits with i32 targets flattens positions",
          "[decompositions]") {
  Built t = build({{"logits", tt({2, 3, 5})}, {"targets", tt({2, 3}, DType::i32)}},
                  OpId::CrossEntropy);
  check_well_formed(t);
  const BoundSymbol& c = t.comp();
  check_cross_entropy_structure(c, DType::i32, 6);
  REQUIRE(count(c, OpId::Reshape) == 2);
  CHECK(c.subsymbols[0].attrs.get_ints("shape") == IntList{6, 5});
  CHECK(c.subsymbols[1].attrs.get_ints("shape") == IntList{6});

  Value logits = filled({2, 3, 5}, 1.9);
  std::vector<double> targets{4, 3, 0, 0, 1, 2};
  Value loss = run(t, {logits, Value{{2, 3}, targets}});
  CHECK(loss.data[0] == Approx(cross_entropy_ref(logits, targets)).epsilon(1e-13));
  // Uniform logits: the loss is log(V) whatever the targets.
  Value flat{{2, 3, 5}, std::vector<double>(30, 0.25)};
  CHECK(run(t, {flat, Value{{2, 3}, targets}}).data[0] == Approx(std::log(5.0)).epsilon(1e-14));
}

TEST_CASE("decompositions name their values from the trace's counter", "[decompositions]") {
  Built t = build({{"x", tt({2, 3})}, {"w", tt({3})}, {"b", tt({3})}}, OpId::LayerNorm,
                  Attrs{{"eps", 1e-5}});
  std::set<std::string> names;
  for_each_bsym(t.trace.bsyms, [&](const BoundSymbol& s) {
    for (const Proxy& o : s.outputs) names.insert(o.name);
  });
  // The composite's output and its last sub-symbol share the one name.
  CHECK(names.size() == t.comp().subsymbols.size());
  for (const std::string& n : names) CHECK(n.rfind('t', 0) == 0);
}
