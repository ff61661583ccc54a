// scaled_dot_product_attention_grad: the CPU's blocked kernel against the
// op's decomposition run on the CPU, and both against the float64 reference
// executor, on shapes the blocking has to get right: causal blocks of 128
// query rows with a remainder, non-causal blocks of query rows that stop
// short of Tq, a group of heads that does not divide the batch, Tq != Tk,
// head sizes of q·k and v that differ, one key, no batch dimension. f32 as
// close to float64 as the decomposition is (2e-5); bf16 to bf16's precision. Also: the VJP of attention emits the op,
// and a trace run through it keeps no [Tq, Tk] value.
#include <catch2/catch.hpp>

#include <string>

#include "ir/error.h"
#include "passes/grad.h"
#include "test/cpu_check.h"

using namespace fsdpc;
using namespace fsdpc::test;

namespace {

struct AttnCase {
  Shape batch;  // the leading dims
  int64_t tq, tk, d, dv;
  bool causal;
};

Shape with(const Shape& batch, int64_t rows, int64_t cols) {
  Shape s = batch;
  s.push_back(rows);
  s.push_back(cols);
  return s;
}

// The one-op trace over q, k, v and g, with the decomposition recorded
// when `decomposed` (what an executor without the kernel runs).
Trace grad_trace(const AttnCase& c, DType dt, bool decomposed) {
  Trace t;
  TraceBuilder b(t, TraceBuilder::Options{decomposed});
  b.add_arg(Proxy{"q", tt(with(c.batch, c.tq, c.d), dt), "", true});
  b.add_arg(Proxy{"k", tt(with(c.batch, c.tk, c.d), dt), "", true});
  b.add_arg(Proxy{"v", tt(with(c.batch, c.tk, c.dv), dt), "", true});
  b.add_arg(Proxy{"g", tt(with(c.batch, c.tq, c.dv), dt), "", true});
  std::vector<ReturnTree> leaves;
  for (const Proxy& p : b.emit(OpId::ScaledDotProductAttentionGrad,
                               {Operand::of("q"), Operand::of("k"), Operand::of("v"), Operand::of("g")},
                               Attrs{{"is_causal", c.causal}, {"scale", 1.0 / std::sqrt(static_cast<double>(c.d))}}))
    leaves.push_back(ReturnTree::leaf(p.name));
  t.returns = ReturnTree::tuple(std::move(leaves));
  return t;
}

std::vector<Value> grad_values(Rng& r, const AttnCase& c, DType dt) {
  std::vector<Value> v;
  // Scores of a few units: probabilities neither flat nor one-hot.
  for (const Shape& s : {with(c.batch, c.tq, c.d), with(c.batch, c.tk, c.d), with(c.batch, c.tk, c.dv),
                         with(c.batch, c.tq, c.dv)})
    v.push_back(reference::make_value(tt(s, dt), r.values(dt, numel(s), 1.5)));
  return v;
}

const std::vector<AttnCase> kCases = {
    {{2, 3}, 10, 10, 8, 8, true},   // GPT-2's layout, one block
    {{2}, 7, 13, 5, 6, false},      // Tq != Tk, D != Dv, odd sizes
    {{3}, 300, 300, 16, 16, true},  // causal blocks of 128, 128, 44: keys stop at each block's end
    {{3}, 700, 700, 4, 4, false},   // groups of 2 heads over 3
    {{1}, 1500, 800, 4, 3, false},  // blocks of 1310 query rows and a remainder of 190
    {{4}, 5, 1, 4, 2, false},       // one key: p is 1, dq and dk are 0
    {{}, 9, 9, 4, 4, true},         // no batch dimension
};

std::string label(const AttnCase& c, DType dt) {
  return std::string(dtype_name(dt)) + " batch" + shape_str(c.batch) + " Tq " + std::to_string(c.tq) + " Tk " +
         std::to_string(c.tk) + " D " + std::to_string(c.d) + " Dv " + std::to_string(c.dv) +
         (c.causal ? " causal" : "");
}

}  // namespace

TEST_CASE("scaled_dot_product_attention_grad f32: the blocked CPU kernel matches the decomposition and the "
          "float64 reference as closely as the decomposition does",
          "[attention][cpu]") {
  Rng r;
  for (const AttnCase& c : kCases) {
    INFO(label(c, DType::f32));
    const std::vector<Value> args = grad_values(r, c, DType::f32);
    const Trace fused = grad_trace(c, DType::f32, false);
    const Trace decomposed = grad_trace(c, DType::f32, true);
    REQUIRE(cpu_executor().claims(fused.bsyms.back()));
    const std::vector<Value> want = reference::run(fused, args);           // float64, direct
    const std::vector<Value> want_dec = reference::run(decomposed, args);  // float64, the decomposition
    const std::vector<Value> got = CpuRunner().run(fused, args);           // the blocked kernel
    const std::vector<Value> got_dec = CpuRunner(true).run(decomposed, args);
    REQUIRE(got.size() == 3);
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("output " << i << " (dq, dk, dv)");
      check_close(want_dec[i], want[i], 1e-12, 0.1);  // the two float64 definitions agree
      // f32 sums over up to 1500 keys, and ds's cancellation (p·(dp − rowsum)):
      // the decomposition run on the CPU is itself up to 1.1e-5 from float64
      // here (measured), the kernel up to 1.0e-5.
      check_close(got_dec[i], want[i], 2e-5, 0.1);
      check_close(got[i], want[i], 2e-5, 0.1);
      check_close(got[i], got_dec[i], 2e-5, 0.1);
    }
    if (c.tk == 1) {  // one key: every probability is 1, so no score moves it
      for (double x : got[0].data) CHECK(x == 0.0);
      for (double x : got[1].data) CHECK(x == 0.0);
    }
  }
}

TEST_CASE("scaled_dot_product_attention_grad bf16: the blocked CPU kernel rounds where the decomposition does",
          "[attention][cpu][bf16]") {
  Rng r;
  for (const AttnCase& c : kCases) {
    INFO(label(c, DType::bf16));
    const std::vector<Value> args = grad_values(r, c, DType::bf16);
    const Trace fused = grad_trace(c, DType::bf16, false);
    const Trace decomposed = grad_trace(c, DType::bf16, true);
    for (const Proxy& o : fused.bsyms.back().outputs) CHECK(o.type.dtype == DType::bf16);
    REQUIRE(cpu_executor().claims(fused.bsyms.back()));
    const std::vector<Value> want = reference::run(fused, args);
    const std::vector<Value> got = CpuRunner().run(fused, args);
    const std::vector<Value> got_dec = CpuRunner(true).run(decomposed, args);
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("output " << i << " (dq, dk, dv)");
      // p and ds rounded once each, the products accumulated in f32: a
      // bf16 rounding or two (2^-8) beside the decomposition and float64.
      check_close(got[i], got_dec[i], 1e-2, 0.1);
      check_close(got[i], want[i], 2e-2, 0.1);
    }
  }
}

TEST_CASE("attention's VJP is one scaled_dot_product_attention_grad, which keeps no [Tq, Tk] value on the CPU",
          "[attention][vjp]") {
  const AttnCase c{{2, 4}, 64, 64, 16, 16, true};
  Trace t;
  TraceBuilder b(t);
  // Parameters, so that grad differentiates with respect to all three.
  for (const char* name : {"q", "k", "v"}) b.add_arg(Proxy{name, tt(with(c.batch, c.tq, c.d)), name, true});
  Proxy o = b.emit1(OpId::ScaledDotProductAttention, {Operand::of("q"), Operand::of("k"), Operand::of("v")},
                    Attrs{{"is_causal", true}, {"scale", 0.25}});
  Proxy loss = b.emit1(OpId::Sum, {Operand::of(o.name)}, Attrs{{"dims", IntList{0, 1, 2, 3}}});
  t.returns = ReturnTree::leaf(loss.name);
  const Trace joint = grad(t);
  int grads = 0;
  for (const BoundSymbol& s : joint.bsyms) {
    if (s.op != OpId::ScaledDotProductAttentionGrad) continue;
    ++grads;
    CHECK(s.attrs.get_bool("is_causal"));
    CHECK(s.attrs.get_double("scale") == 0.25);
  }
  CHECK(grads == 1);
  // Top-level values only: the decomposition's sub-symbols run only where no
  // kernel claims the op. A [.., Tq, Tk] value is 64 * 64 per head.
  for (const BoundSymbol& s : joint.bsyms)
    for (const Proxy& p : s.outputs) {
      INFO(p.name << " " << type_str(p.type) << " from " << op_name(s.op));
      CHECK(numel(p.type.shape) < 2 * 4 * 64 * 64);
    }
}

// Each rank runs attention on its own part of the batch: a head's
// gradients must not depend on how many other heads share the call, or N
// ranks drift from one process (bf16 rounds every such difference up to
// 2^-9).
TEST_CASE("scaled_dot_product_attention_grad: a head's gradients are the same bits in a batch of any size",
          "[attention][cpu]") {
  Rng r;
  for (DType dt : {DType::f32, DType::bf16})
    for (const AttnCase& whole : {AttnCase{{24, 2}, 16, 16, 32, 32, true}, AttnCase{{6, 4}, 300, 300, 8, 8, true}}) {
      AttnCase half = whole;
      half.batch[0] /= 2;
      INFO(label(whole, dt));
      const std::vector<Value> args = grad_values(r, whole, dt);
      std::vector<Value> half_args;
      for (const Value& v : args) {
        Shape s = v.type.shape;
        s[0] /= 2;
        half_args.push_back(reference::make_value(tt(s, dt), Data(v.data.begin(), v.data.begin() + numel(s))));
      }
      const std::vector<Value> got = CpuRunner().run(grad_trace(whole, dt, false), args);
      const std::vector<Value> got_half = CpuRunner().run(grad_trace(half, dt, false), half_args);
      for (size_t i = 0; i < 3; ++i) {
        INFO("output " << i << " (dq, dk, dv)");
        size_t differ = 0;
        for (size_t e = 0; e < got_half[i].data.size(); ++e) differ += got[i].data[e] != got_half[i].data[e];
        CHECK(differ == 0);
      }
    }
}
