// The CPU executor in bf16: the products (matmul, linear, attention) on
// oneDNN with f32 accumulation against the float64 reference at bf16
// tolerances; conversions bit for bit against executors/bf16.h; every op
// that computes in f32 on bf16 operands equal, bit for bit, to its f32
// result rounded once; data movement and selection exact.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

#include "test/cpu_check.h"
#include "test/op_samples.h"

using namespace fsdpc;
using namespace fsdpc::test;

namespace {

// A bf16 result carries one rounding (2^-9 relative) on top of its f32
// computation; products also sum bf16-rounded operands.
constexpr double kBf16Rtol = 1e-2;

Arg as_bf16(Arg a) {
  a.type.dtype = DType::bf16;
  for (double& x : a.data) x = round_to_bf16(static_cast<float>(x));
  return a;
}

Arg with_dtype(Arg a, DType d) {
  a.type.dtype = d;
  return a;
}

// The bits of a bf16 value read back as a double (exact).
uint16_t bits(double v) { return f32_to_bf16(static_cast<float>(v)); }

// `op` on bf16 operands equals `op` on their f32 widening, rounded once.
void check_rounded_once(OpId op, const std::vector<Arg>& bf16_args, const Attrs& attrs = {}) {
  std::vector<Arg> f32_args;
  for (const Arg& a : bf16_args)
    f32_args.push_back(!a.scalar && a.type.dtype == DType::bf16 ? with_dtype(a, DType::f32) : a);
  const OneOp lo = one_op(op, bf16_args, attrs), hi = one_op(op, f32_args, attrs);
  INFO(print_trace(lo.trace));
  REQUIRE(cpu_executor().claims(lo.trace.bsyms.back()));
  const std::vector<Value> got = CpuRunner().run(lo.trace, lo.values);
  const std::vector<Value> f32 = CpuRunner().run(hi.trace, hi.values);
  REQUIRE(got.size() == f32.size());
  for (size_t o = 0; o < got.size(); ++o) {
    if (got[o].type.dtype != DType::bf16) {  // a comparison's bools
      CHECK(got[o].data == f32[o].data);
      continue;
    }
    size_t wrong = 0;
    for (size_t i = 0; i < got[o].data.size(); ++i) {
      const double want = round_to_bf16(static_cast<float>(f32[o].data[i]));
      if (!(got[o].data[i] == want || (std::isnan(got[o].data[i]) && std::isnan(want)))) ++wrong;
    }
    INFO(wrong << " of " << got[o].data.size() << " elements are not the f32 result rounded once");
    CHECK(wrong == 0);
  }
}

}  // namespace

TEST_CASE("cpu bf16: matmul and linear accumulate in f32", "[cpu][bf16]") {
  Rng r;
  for (int i = 0; i < 2 * kShapes; ++i) {
    const int64_t m = r.dim(), k = i % 7 == 0 ? 0 : r.dim(), n = r.dim();
    Shape a = r.shape(0, 2), b = a;
    a.insert(a.end(), {m, k});
    b.insert(b.end(), {k, n});
    check_op(OpId::Matmul, {as_bf16(r.tensor(a)), as_bf16(r.tensor(b))}, {}, kBf16Rtol);
    check_op(OpId::Matmul, {as_bf16(r.tensor(a)), as_bf16(r.tensor({k, n}))}, {}, kBf16Rtol);
    Shape x = r.shape(0, 2);
    x.push_back(k);
    check_op(OpId::Linear, {as_bf16(r.tensor(x)), as_bf16(r.tensor({n, k})), as_bf16(r.tensor({n}))}, {},
             kBf16Rtol);
  }
  // 600 rows: the right operand is packed into oneDNN's layout first.
  check_op(OpId::Matmul, {as_bf16(r.tensor({600, 96})), as_bf16(r.tensor({96, 130}))}, {}, kBf16Rtol);
  check_op(OpId::Linear, {as_bf16(r.tensor({3, 200, 48})), as_bf16(r.tensor({70, 48})), as_bf16(r.tensor({70}))},
           {}, kBf16Rtol);
  // 300 ones summed: a bf16 running sum stops at 256 (256 + 1 rounds back to
  // 256), an f32 one reaches 300, which bf16 holds exactly.
  Arg ones = as_bf16(r.tensor({1, 300}));
  for (double& x : ones.data) x = 1.0;
  Arg col = as_bf16(r.tensor({300, 1}));
  for (double& x : col.data) x = 1.0;
  const OneOp o = one_op(OpId::Matmul, {ones, col});
  CHECK(CpuRunner().run(o.trace, o.values).at(0).data == Data{300.0});
}

namespace {

// Attention on bf16 q, k, v against float64, each output element within a
// few bf16 roundings of its own dot product's scale, Σ_j p_j·|v_j|: the
// probabilities rounded once to bf16 for p·v (where oneDNN has bf16
// kernels; 2^-9 of each term) and the output rounded once (2^-9 of the
// value). A check relative to the output alone would fail where the
// v_j's signs cancel, as every bf16 attention (PyTorch's too) does there.
void check_bf16_attention(const Arg& q, const Arg& k, const Arg& v, bool causal, double scale) {
  Attrs attrs{{"is_causal", causal}, {"scale", scale}};
  const OneOp o = one_op(OpId::ScaledDotProductAttention, {q, k, v}, attrs);
  INFO(print_trace(o.trace));
  REQUIRE(cpu_executor().claims(o.trace.bsyms.back()));
  const Value got = CpuRunner().run(o.trace, o.values).at(0);
  const Shape& qs = q.type.shape;
  const size_t r = qs.size();
  const int64_t tq = qs[r - 2], d = qs[r - 1], tk = k.type.shape[r - 2], dv = v.type.shape[r - 1];
  const int64_t batch = numel(qs) / std::max<int64_t>(tq * d, 1);
  double worst = 0;
  std::vector<double> p(static_cast<size_t>(tk));
  for (int64_t h = 0; h < batch; ++h)
    for (int64_t i = 0; i < tq; ++i) {
      double top = -INFINITY, total = 0;
      for (int64_t j = 0; j < tk; ++j) {
        double s = 0;
        for (int64_t c = 0; c < d; ++c) s += q.data[(h * tq + i) * d + c] * k.data[(h * tk + j) * d + c];
        p[j] = causal && j > i ? -INFINITY : s * scale;
        top = std::max(top, p[j]);
      }
      for (int64_t j = 0; j < tk; ++j) total += p[j] = std::isinf(p[j]) ? 0.0 : std::exp(p[j] - top);
      for (int64_t c = 0; c < dv; ++c) {
        double want = 0, size = 0;
        for (int64_t j = 0; j < tk; ++j) {
          const double term = p[j] / total * v.data[(h * tk + j) * dv + c];
          want += term;
          size += std::abs(term);
        }
        const double err = std::abs(got.data[(h * tq + i) * dv + c] - want);
        if (err > 0) worst = std::max(worst, err / (size + 1e-30));
      }
    }
  INFO("worst error " << worst << " of its dot product's scale");
  CHECK(worst <= 4 * std::ldexp(1.0, -9));
}

}  // namespace

TEST_CASE("cpu bf16: attention keeps scores in f32 and multiplies bf16 probabilities", "[cpu][bf16]") {
  Rng r;
  for (int i = 0; i < kShapes; ++i) {
    const Shape batch = r.shape(0, 2);
    const int64_t tq = r.dim(), tk = i == 0 ? 0 : r.dim(), d = r.dim(false), dv = r.dim();
    auto with = [&](int64_t a, int64_t b) {
      Shape s = batch;
      s.insert(s.end(), {a, b});
      return as_bf16(r.tensor(s));
    };
    check_bf16_attention(with(tq, d), with(tk, d), with(tk, dv), i % 2 == 0, r.uniform(0.1, 1.0));
  }
  for (bool causal : {true, false})  // blocks of 128 query rows, and packed operands
    check_bf16_attention(as_bf16(r.tensor({2, 1, 530, 16})), as_bf16(r.tensor({2, 1, 530, 16})),
                         as_bf16(r.tensor({2, 1, 530, 8})), causal, 0.25);
}

TEST_CASE("cpu bf16: conversions round to nearest even and keep NaN and infinity", "[cpu][bf16]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // Ties: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 and goes to the even
  // 1; 1 + 3 * 2^-8 goes up to the even 1 + 2^-6. Past the largest bf16,
  // f32's largest value rounds to infinity, as torch's .to(bfloat16) does.
  const std::vector<std::pair<float, float>> cases{
      {1.0f + 0x1p-8f, 1.0f},        {1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-6f},
      {-(1.0f + 0x1p-8f), -1.0f},     {1.0f + 0x1p-8f + 0x1p-20f, 1.0f + 0x1p-7f},
      {std::numeric_limits<float>::max(), inf}, {inf, inf}, {-inf, -inf},
      {-0.0f, -0.0f},                 {0x1p-130f, 0x1p-130f},  // a subnormal bf16 holds exactly
  };
  Arg x{tt({static_cast<int64_t>(cases.size() + 1)}), {}, std::nullopt};
  for (const auto& c : cases) x.data.push_back(c.first);
  x.data.push_back(nan);
  OneOp o = one_op(OpId::ConvertElementType, {x}, Attrs{{"dtype", std::string("bf16")}});
  const Data got = CpuRunner().run(o.trace, o.values).at(0).data;
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO("f32 " << cases[i].first);
    CHECK(std::bit_cast<uint32_t>(static_cast<float>(got[i])) == std::bit_cast<uint32_t>(cases[i].second));
  }
  CHECK(std::isnan(got.back()));
  // Many values, past the threaded and vector paths: executors/bf16.h's bits.
  Rng r;
  Arg many = r.tensor({100003}, DType::f32, 1e3);
  o = one_op(OpId::ConvertElementType, {many}, Attrs{{"dtype", std::string("bf16")}});
  const Data narrowed = CpuRunner().run(o.trace, o.values).at(0).data;
  size_t wrong = 0;
  for (size_t i = 0; i < narrowed.size(); ++i)
    wrong += bits(narrowed[i]) != f32_to_bf16(static_cast<float>(many.data[i]));
  CHECK(wrong == 0);
  // And back, and to and from every other dtype, as the reference converts.
  const DType others[] = {DType::f32, DType::f64, DType::i32, DType::i64, DType::boolean};
  for (DType d : others) {
    check_op(OpId::ConvertElementType, {as_bf16(r.tensor({37}, DType::f32, 4.0))},
             Attrs{{"dtype", std::string(dtype_name(d))}});
    Arg from = r.tensor({37}, d, 4.0);
    if (is_float(d))
      for (double& v : from.data) v = round_to_bf16(static_cast<float>(v));  // else the reference keeps the rest
    check_op(OpId::ConvertElementType, {from}, Attrs{{"dtype", std::string("bf16")}});
  }
}

TEST_CASE("cpu bf16: ops that compute in f32 round their result once", "[cpu][bf16]") {
  Rng r;
  for (OpId op : test::elementwise_ops())
    for (int i = 0; i < 4; ++i) {
      const Shape s = i == 0 ? Shape{1000} : r.shape(0, 3);
      if (op == OpId::ConvertElementType) continue;  // its own test above
      // The sample's operands, its float tensors in bf16.
      std::vector<Arg> args;
      const test::OpSample sample = test::op_sample(op);
      for (size_t k = 0; k < sample.inputs.size(); ++k) {
        const std::optional<TensorType>& t = sample.inputs[k].tensor;
        if (!t) {
          args.push_back(scalar(0.75));
          continue;
        }
        Arg a = sample.domain(k) == test::Domain::positive ? r.positive(s) : r.tensor(s, t->dtype, 3.0);
        args.push_back(is_float(t->dtype) ? as_bf16(a) : with_dtype(a, t->dtype));
      }
      check_rounded_once(op, args, sample.attrs);
    }
  for (int i = 0; i < kShapes; ++i) {
    const Shape s = r.shape(1, 4);
    check_rounded_once(OpId::Sum, {as_bf16(r.tensor(s))}, Attrs{{"dims", r.subset(static_cast<int64_t>(s.size()))}});
    check_rounded_once(OpId::Softmax, {as_bf16(r.tensor(s, DType::f32, 4.0))},
                       Attrs{{"dim", r.uniform_int(0, static_cast<int64_t>(s.size()) - 1)}});
    const Shape c{s.back()};
    check_rounded_once(OpId::LayerNorm, {as_bf16(r.tensor(s)), as_bf16(r.tensor(c)), as_bf16(r.tensor(c))},
                       Attrs{{"eps", 1e-5}});
    check_rounded_once(OpId::Gelu, {as_bf16(r.tensor(s, DType::f32, 3.0))}, Attrs{{"approximate", std::string("tanh")}});
  }
  // The embedding's gradient: many bf16 rows added in f32, rounded once.
  Arg idx = r.tensor({200}, DType::i64);
  for (double& v : idx.data) v = static_cast<double>(r.uniform_int(0, 9));
  check_rounded_once(OpId::IndexAdd, {as_bf16(r.tensor({10, 8})), idx, as_bf16(r.tensor({200, 8}))},
                     Attrs{{"dim", int64_t{0}}});
}

TEST_CASE("cpu bf16: data movement and selection are exact", "[cpu][bf16]") {
  Rng r;
  for (int i = 0; i < kShapes; ++i) {
    const Shape s = r.shape(1, 4);
    const int64_t rank = static_cast<int64_t>(s.size());
    IntList dims(rank);
    std::iota(dims.begin(), dims.end(), 0);
    std::shuffle(dims.begin(), dims.end(), r.gen);
    check_op(OpId::Permute, {as_bf16(r.tensor(s))}, Attrs{{"dims", dims}});
    check_op(OpId::Cat, {as_bf16(r.tensor(s)), as_bf16(r.tensor(s))}, Attrs{{"dim", r.uniform_int(0, rank - 1)}});
    check_op(OpId::Where, {r.tensor(s, DType::boolean), as_bf16(r.tensor(s)), scalar(0.5)});
    check_op(OpId::Where, {r.tensor(s, DType::boolean), as_bf16(r.tensor(s)), as_bf16(r.tensor(s))});
    check_op(OpId::Lt, {as_bf16(r.tensor(s)), as_bf16(r.tensor(s))});
  }
  Arg idx = r.tensor({9}, DType::i32);
  for (double& v : idx.data) v = static_cast<double>(r.uniform_int(0, 6));
  check_op(OpId::Take, {as_bf16(r.tensor({7, 5})), idx}, Attrs{{"dim", int64_t{0}}});
  check_op(OpId::Full, {}, Attrs{{"shape", IntList{3, 4}}, {"value", 0.375}, {"dtype", std::string("bf16")}, {"device", std::string("cpu")}});
}
