// linear_cross_entropy, linear_cross_entropy_grad (passes/fuse_head.h) and
// the two at once, linear_cross_entropy_with_grad
// (passes/head_grad_forward.h): the CPU's chunked kernels against the op's decomposition (linear then
// cross_entropy, and what autodiff makes of it) run on the CPU, and both
// against the float64 reference executor, on shapes the chunking has to get
// right: a vocabulary no chunk divides, rows no chunk divides, one chunk, a
// chunk of one row; f32 to 1e-6, bf16 to bf16's precision.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

#include "ir/error.h"
#include "ir/meta.h"
#include "test/cpu_check.h"

using namespace fsdpc;
using namespace fsdpc::test;

namespace {

struct HeadCase {
  Shape h;  // [..., C]
  int64_t vocab;
  int64_t chunk;  // 0: the kernel's byte budget
};

// A trace of one op over the head's operands h, w, targets (and g), with
// its decomposition recorded when `decomposed`.
Trace head_trace(OpId op, const HeadCase& c, DType dt, bool decomposed) {
  Trace t;
  TraceBuilder b(t, TraceBuilder::Options{decomposed});
  Shape rows(c.h.begin(), c.h.end() - 1);
  b.add_arg(Proxy{"h", tt(c.h, dt), "", true});
  b.add_arg(Proxy{"w", tt({c.vocab, c.h.back()}, dt), "", true});
  b.add_arg(Proxy{"targets", tt(rows, DType::i64), "", true});
  std::vector<Operand> ins{Operand::of("h"), Operand::of("w"), Operand::of("targets")};
  if (op != OpId::LinearCrossEntropy) {
    b.add_arg(Proxy{"g", tt({}, linear_cross_entropy_loss_dtype(dt)), "", true});
    ins.push_back(Operand::of("g"));
  }
  Attrs attrs;
  if (c.chunk > 0) attrs.set("chunk", c.chunk);
  std::vector<ReturnTree> leaves;
  for (const Proxy& p : b.emit(op, ins, attrs)) leaves.push_back(ReturnTree::leaf(p.name));
  t.returns = ReturnTree::tuple(std::move(leaves));
  return t;
}

std::vector<Value> head_values(Rng& r, const HeadCase& c, DType dt, bool with_g) {
  Shape rows(c.h.begin(), c.h.end() - 1);
  std::vector<Value> v;
  // Logits of a few units: a softmax neither flat nor one-hot.
  v.push_back(reference::make_value(tt(c.h, dt), r.values(dt, numel(c.h), 1.0)));
  v.push_back(reference::make_value(tt({c.vocab, c.h.back()}, dt), r.values(dt, c.vocab * c.h.back(), 0.5)));
  Data targets(numel(rows));
  for (double& x : targets) x = static_cast<double>(r.uniform_int(0, c.vocab - 1));
  v.push_back(reference::make_value(tt(rows, DType::i64), targets));
  if (with_g) v.push_back(reference::make_value(tt({}, linear_cross_entropy_loss_dtype(dt)), {0.75}));
  return v;
}

const std::vector<HeadCase> kCases = {
    {{10, 8}, 37, 4},     // 37 words, 10 rows: no chunk of 4 divides either
    {{10, 8}, 37, 0},     // the byte budget: one chunk
    {{10, 8}, 37, 1},     // a chunk of one row
    {{2, 5, 12}, 53, 3},  // rows from two dims, 15 rows in chunks of 3
    {{7, 16}, 1, 2},      // one word: every loss is 0, every gradient 0
    {{33, 24}, 1031, 8},  // a vocabulary past one vector's width, odd
};

std::string label(const HeadCase& c, DType dt) {
  return std::string(dtype_name(dt)) + " h" + shape_str(c.h) + " V " + std::to_string(c.vocab) + " chunk " +
         std::to_string(c.chunk);
}

}  // namespace

TEST_CASE("linear_cross_entropy f32: the chunked CPU kernels match the decomposition and the float64 reference "
          "to 1e-6",
          "[linear_cross_entropy][cpu]") {
  Rng r;
  for (const HeadCase& c : kCases)
    for (OpId op : {OpId::LinearCrossEntropy, OpId::LinearCrossEntropyGrad, OpId::LinearCrossEntropyWithGrad}) {
      INFO(op_name(op) << " " << label(c, DType::f32));
      const std::vector<Value> args = head_values(r, c, DType::f32, op != OpId::LinearCrossEntropy);
      const Trace fused = head_trace(op, c, DType::f32, false);
      const Trace decomposed = head_trace(op, c, DType::f32, true);
      REQUIRE(cpu_executor().claims(fused.bsyms.back()));
      const std::vector<Value> want = reference::run(fused, args);       // float64, direct
      const std::vector<Value> want_dec = reference::run(decomposed, args);  // float64, the decomposition
      const std::vector<Value> got = CpuRunner().run(fused, args);        // the chunked kernel
      const std::vector<Value> got_dec = CpuRunner(true).run(decomposed, args);  // the prims on the CPU
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        INFO("output " << i);
        check_close(want_dec[i], want[i], 1e-12, 0.1);  // the two float64 definitions agree
        check_close(got[i], want[i], 1e-6, 0.1);
        check_close(got[i], got_dec[i], 1e-6, 0.1);
      }
      if (c.vocab == 1) {
        for (double x : got[0].data) CHECK(x == 0.0);
      }
    }
}

TEST_CASE("linear_cross_entropy bf16: the chunked CPU kernels round where the decomposition does",
          "[linear_cross_entropy][cpu][bf16]") {
  Rng r;
  for (const HeadCase& c : kCases)
    for (OpId op : {OpId::LinearCrossEntropy, OpId::LinearCrossEntropyGrad, OpId::LinearCrossEntropyWithGrad}) {
      INFO(op_name(op) << " " << label(c, DType::bf16));
      const std::vector<Value> args = head_values(r, c, DType::bf16, op != OpId::LinearCrossEntropy);
      const Trace fused = head_trace(op, c, DType::bf16, false);
      const Trace decomposed = head_trace(op, c, DType::bf16, true);
      // The loss is f32; the gradients are h's and w's bf16.
      const bool loss_first = op != OpId::LinearCrossEntropyGrad;
      CHECK(fused.bsyms.back().outputs[0].type.dtype == (loss_first ? DType::f32 : DType::bf16));
      REQUIRE(cpu_executor().claims(fused.bsyms.back()));
      const std::vector<Value> want = reference::run(fused, args);
      const std::vector<Value> got = CpuRunner().run(fused, args);
      const std::vector<Value> got_dec = CpuRunner(true).run(decomposed, args);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        INFO("output " << i);
        // The same roundings as the unfused bf16 head: to f32's precision
        // beside it, a bf16 rounding or two (2^-8) each beside float64.
        check_close(got[i], got_dec[i], i == 0 && loss_first ? 1e-6 : 1e-2, 0.1);
        check_close(got[i], want[i], 2e-2, 0.1);
      }
    }
}

TEST_CASE("linear_cross_entropy: bad input is a clear error", "[linear_cross_entropy]") {
  const HeadCase c{{4, 8}, 5, 2};
  Rng r;
  std::vector<Value> args = head_values(r, c, DType::f32, false);
  args[2].data[3] = 5;  // one past the last word
  const Trace t = head_trace(OpId::LinearCrossEntropy, c, DType::f32, false);
  CHECK_THROWS_WITH(CpuRunner().run(t, args), Catch::Contains("target 5 at position 3 is out of range for 5 classes"));
  CHECK_THROWS_WITH(reference::run(t, args), Catch::Contains("target 5 at position 3"));

  auto error_of = [](const std::vector<OperandType>& in, const Attrs& attrs) {
    try {
      infer_types(OpId::LinearCrossEntropy, in, attrs);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto in = [](Shape s, DType d = DType::f32) { return OperandType::of(tt(std::move(s), d)); };
  CHECK_THAT(error_of({in({4, 8}), in({5, 8}), in({4}, DType::i64)}, {{"chunk", int64_t{0}}}),
             Catch::Contains("chunk 0 must be >= 1"));
  CHECK_THAT(error_of({in({4, 8}), in({5, 7}), in({4}, DType::i64)}, {}), Catch::Contains("features differ"));
  CHECK_THAT(error_of({in({4, 8}), in({5, 8}), in({3}, DType::i64)}, {}), Catch::Contains("expected targets [4]"));
  CHECK_THAT(error_of({in({4, 8}), in({5, 8}, DType::bf16), in({4}, DType::i64)}, {}), Catch::Contains("dtype"));
}

// ---- linear_cross_entropy_stats: one rank's slice of a vocabulary-parallel head

namespace {

// Rank `rank` of `tp` over a vocabulary of `vocab` words: ceil(vocab / tp)
// rows of w, the first at rank * rows, those past `vocab` padding.
struct SliceCase {
  Shape h;
  int64_t vocab, tp, rank, chunk;
  int64_t rows() const { return (vocab + tp - 1) / tp; }
  int64_t offset() const { return rank * rows(); }
};

const std::vector<SliceCase> kSlices = {
    {{10, 8}, 37, 2, 0, 4},      // no chunk of 4 divides 19 classes or 10 rows
    {{10, 8}, 37, 2, 1, 4},      // 18 real classes and one padded
    {{10, 8}, 37, 4, 3, 0},      // the byte budget: one chunk; 7 real of 10
    {{10, 8}, 37, 4, 2, 1},      // a chunk of one row
    {{2, 5, 12}, 53, 3, 1, 3},   // rows from two dims
    {{7, 16}, 5, 4, 3, 2},       // every class of the slice padding: lse -inf, every gradient 0
    {{33, 24}, 1031, 2, 1, 8},   // a vocabulary past one vector's width, odd, padded
};

std::string label(const SliceCase& c) {
  return "h" + shape_str(c.h) + " V " + std::to_string(c.vocab) + " rank " + std::to_string(c.rank) + "/" +
         std::to_string(c.tp) + " chunk " + std::to_string(c.chunk);
}

// The slice's stats (and, `grad`, their gradient for cotangents dlse and
// dtarget of the trace's last three arguments) as one statement.
Trace slice_trace(OpId op, const SliceCase& c, bool decomposed) {
  Trace t;
  TraceBuilder b(t, TraceBuilder::Options{decomposed});
  const Shape rows(c.h.begin(), c.h.end() - 1);
  b.add_arg(Proxy{"h", tt(c.h), "", true});
  b.add_arg(Proxy{"w", tt({c.rows(), c.h.back()}), "", true});
  b.add_arg(Proxy{"targets", tt(rows, DType::i64), "", true});
  b.add_arg(Proxy{"offset", tt({}, DType::i64), "", true});
  std::vector<Operand> ins{Operand::of("h"), Operand::of("w"), Operand::of("targets"), Operand::of("offset")};
  if (op == OpId::LinearCrossEntropyStatsGrad)
    for (const char* n : {"lse", "dlse", "dtarget"}) {
      b.add_arg(Proxy{n, tt(rows), "", true});
      ins.push_back(Operand::of(n));
    }
  Attrs attrs{{"vocab", c.vocab}};
  if (c.chunk > 0) attrs.set("chunk", c.chunk);
  std::vector<ReturnTree> leaves;
  for (const Proxy& p : b.emit(op, ins, attrs)) leaves.push_back(ReturnTree::leaf(p.name));
  t.returns = ReturnTree::tuple(std::move(leaves));
  return t;
}

// h, the slice of w (its padded rows zero, as tp's padded table holds
// them), targets over the whole vocabulary, the offset.
std::vector<Value> slice_values(Rng& r, const SliceCase& c) {
  const Shape rows(c.h.begin(), c.h.end() - 1);
  const int64_t features = c.h.back();
  Data w = r.values(DType::f32, c.rows() * features, 0.5);
  for (int64_t j = 0; j < c.rows(); ++j)
    if (c.offset() + j >= c.vocab) std::fill(w.begin() + j * features, w.begin() + (j + 1) * features, 0.0);
  Data targets(numel(rows));
  for (double& x : targets) x = static_cast<double>(r.uniform_int(0, c.vocab - 1));
  return {reference::make_value(tt(c.h), r.values(DType::f32, numel(c.h), 1.0)),
          reference::make_value(tt({c.rows(), features}), w), reference::make_value(tt(rows, DType::i64), targets),
          reference::make_value(tt({}, DType::i64), {static_cast<double>(c.offset())})};
}

}  // namespace

TEST_CASE("linear_cross_entropy_stats f32: the chunked CPU kernels match the decomposition and the float64 "
          "reference to 1e-6, padded slices included",
          "[linear_cross_entropy][tp][cpu]") {
  Rng r;
  for (const SliceCase& c : kSlices) {
    INFO(label(c));
    std::vector<Value> args = slice_values(r, c);
    const Shape rows(c.h.begin(), c.h.end() - 1);
    // The forward.
    const Trace stats = slice_trace(OpId::LinearCrossEntropyStats, c, false);
    REQUIRE(cpu_executor().claims(stats.bsyms.back()));
    const std::vector<Value> want = reference::run(stats, args);
    const std::vector<Value> want_dec = reference::run(slice_trace(OpId::LinearCrossEntropyStats, c, true), args);
    const std::vector<Value> got = CpuRunner().run(stats, args);
    const std::vector<Value> got_dec = CpuRunner(true).run(slice_trace(OpId::LinearCrossEntropyStats, c, true), args);
    for (size_t i = 0; i < 2; ++i) {
      INFO("output " << i);
      check_close(want_dec[i], want[i], 1e-12, 0.1);
      check_close(got[i], want[i], 1e-6, 0.1);
      check_close(got[i], got_dec[i], 1e-6, 0.1);
    }
    const bool all_padding = c.offset() >= c.vocab;
    for (size_t k = 0; k < want[0].data.size(); ++k) {
      const int64_t local = static_cast<int64_t>(args[2].data[k]) - c.offset();
      if (local < 0 || local >= c.rows()) CHECK(got[1].data[k] == 0.0);  // another slice's target
      if (all_padding) CHECK(got[0].data[k] == -INFINITY);
    }
    // The backward, for the forward's lse and cotangents of both outputs of
    // the loss's signs (a slice's share of the softmax weighs its lse, the
    // target logit is subtracted), each row its own.
    Data dlse(numel(rows)), dtarget(numel(rows));
    for (double& x : dlse) x = r.uniform(0.05, 1.0);
    for (double& x : dtarget) x = -r.uniform(0.05, 1.0);
    args.push_back(want[0]);
    args.push_back(reference::make_value(tt(rows), dlse));
    args.push_back(reference::make_value(tt(rows), dtarget));
    const Trace grad = slice_trace(OpId::LinearCrossEntropyStatsGrad, c, false);
    REQUIRE(cpu_executor().claims(grad.bsyms.back()));
    const std::vector<Value> gwant = reference::run(grad, args);
    const std::vector<Value> gwant_dec = reference::run(slice_trace(OpId::LinearCrossEntropyStatsGrad, c, true), args);
    const std::vector<Value> ggot = CpuRunner().run(grad, args);
    const std::vector<Value> ggot_dec = CpuRunner(true).run(slice_trace(OpId::LinearCrossEntropyStatsGrad, c, true), args);
    for (size_t i = 0; i < 2; ++i) {
      INFO("gradient " << i);
      check_close(gwant_dec[i], gwant[i], 1e-12, 0.1);
      // Against float64, f32's own error: exp(z - lse) of f32 logits and a
      // given f32 lse, summed over up to 516 classes per row, reaches 2e-6
      // here for the kernel and the prims alike; the kernel and the prims,
      // both f32, agree to 1e-6.
      check_close(ggot[i], gwant[i], 4e-6, 0.1);
      check_close(ggot_dec[i], gwant[i], 4e-6, 0.1);
      check_close(ggot[i], ggot_dec[i], 1e-6, 0.1);
    }
    // The padded rows of w get exactly zero gradients.
    const int64_t features = c.h.back();
    for (int64_t j = std::max<int64_t>(c.vocab - c.offset(), 0); j < c.rows(); ++j)
      for (int64_t i = 0; i < features; ++i) CHECK(ggot[1].data[j * features + i] == 0.0);
  }
}

// What the tp trace makes of the slices: lse = log(sum over ranks of
// exp(lse_r)), the loss mean(lse - sum of the target logits), and for the
// loss's cotangent g the slices' cotangents dlse_r = g/n exp(lse_r - lse)
// and dtarget = -g/n, whose gradients, dh summed over the ranks and dw's
// real rows stacked, are linear_cross_entropy's of the whole head.
TEST_CASE("linear_cross_entropy_stats: the slices of a padded vocabulary compose to linear_cross_entropy and its "
          "gradient to 1e-6",
          "[linear_cross_entropy][tp][cpu]") {
  Rng r;
  for (const auto& [vocab, tp, chunk] : {std::tuple<int64_t, int64_t, int64_t>{37, 2, 4}, {37, 4, 3}, {5, 4, 1}}) {
    const HeadCase whole{{10, 8}, vocab, chunk};
    INFO("V " << vocab << " over " << tp << " ranks, chunk " << chunk);
    const std::vector<Value> head = head_values(r, whole, DType::f32, true);
    const double g = head[3].data[0];
    const std::vector<Value> want_loss = reference::run(head_trace(OpId::LinearCrossEntropy, whole, DType::f32, false),
                                                        {head[0], head[1], head[2]});
    const std::vector<Value> want = reference::run(head_trace(OpId::LinearCrossEntropyGrad, whole, DType::f32, false), head);
    const int64_t n = 10, features = 8;
    std::vector<std::vector<Value>> slices;
    std::vector<double> sum_exp(n, 0.0), target(n, 0.0);
    for (int64_t rank = 0; rank < tp; ++rank) {
      const SliceCase c{{n, features}, vocab, tp, rank, chunk};
      Data w(c.rows() * features, 0.0);
      for (int64_t j = 0; j < c.rows() && c.offset() + j < vocab; ++j)
        for (int64_t i = 0; i < features; ++i) w[j * features + i] = head[1].data[(c.offset() + j) * features + i];
      std::vector<Value> args = {head[0], reference::make_value(tt({c.rows(), features}), w), head[2],
                                 reference::make_value(tt({}, DType::i64), {static_cast<double>(c.offset())})};
      const std::vector<Value> stats = CpuRunner().run(slice_trace(OpId::LinearCrossEntropyStats, c, false), args);
      for (int64_t k = 0; k < n; ++k) {
        sum_exp[k] += std::exp(stats[0].data[k]);
        target[k] += stats[1].data[k];
      }
      args.push_back(stats[0]);
      slices.push_back(std::move(args));
    }
    double loss = 0.0;
    for (int64_t k = 0; k < n; ++k) loss += std::log(sum_exp[k]) - target[k];
    CHECK(loss / n == Approx(want_loss[0].data[0]).epsilon(1e-6));
    Data dh(n * features, 0.0), dw;
    for (int64_t rank = 0; rank < tp; ++rank) {
      const SliceCase c{{n, features}, vocab, tp, rank, chunk};
      std::vector<Value> args = slices[static_cast<size_t>(rank)];
      Data dlse(n), dtarget(n, -g / n);
      for (int64_t k = 0; k < n; ++k) dlse[k] = g / n * std::exp(args[4].data[k] - std::log(sum_exp[k]));
      args.push_back(reference::make_value(tt({n}), dlse));
      args.push_back(reference::make_value(tt({n}), dtarget));
      const std::vector<Value> grads = CpuRunner().run(slice_trace(OpId::LinearCrossEntropyStatsGrad, c, false), args);
      for (int64_t i = 0; i < n * features; ++i) dh[i] += grads[0].data[i];
      const int64_t real = std::clamp<int64_t>(vocab - c.offset(), 0, c.rows());
      dw.insert(dw.end(), grads[1].data.begin(), grads[1].data.begin() + real * features);
    }
    check_close(reference::make_value(want[0].type, dh), want[0], 1e-6, 0.1);
    check_close(reference::make_value(want[1].type, dw), want[1], 1e-6, 0.1);
  }
}

TEST_CASE("linear_cross_entropy_stats: bad input is a clear error", "[linear_cross_entropy][tp]") {
  const SliceCase c{{4, 8}, 37, 2, 1, 2};
  Rng r;
  std::vector<Value> args = slice_values(r, c);
  args[2].data[3] = 37;  // one past the last word of the whole vocabulary
  const Trace t = slice_trace(OpId::LinearCrossEntropyStats, c, false);
  CHECK_THROWS_WITH(CpuRunner().run(t, args), Catch::Contains("target 37 at position 3 is out of range for 37 classes"));
  CHECK_THROWS_WITH(reference::run(t, args), Catch::Contains("target 37 at position 3"));
  auto error_of = [](OpId op, const std::vector<OperandType>& in, const Attrs& attrs) {
    try {
      infer_types(op, in, attrs);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto in = [](Shape s, DType d = DType::f32) { return OperandType::of(tt(std::move(s), d)); };
  const std::vector<OperandType> ok = {in({4, 8}), in({19, 8}), in({4}, DType::i64), in({}, DType::i64)};
  CHECK(error_of(OpId::LinearCrossEntropyStats, ok, {{"vocab", int64_t{37}}}) == "no error");
  CHECK_THAT(error_of(OpId::LinearCrossEntropyStats, ok, {}), Catch::Contains("vocab"));
  CHECK_THAT(error_of(OpId::LinearCrossEntropyStats, ok, {{"vocab", int64_t{0}}}), Catch::Contains("vocab 0 must be >= 1"));
  CHECK_THAT(error_of(OpId::LinearCrossEntropyStats, {ok[0], ok[1], ok[2], in({1}, DType::i64)}, {{"vocab", int64_t{37}}}),
             Catch::Contains("offset is i64[1]; expected a scalar"));
  CHECK_THAT(error_of(OpId::LinearCrossEntropyStats, {ok[0], ok[1], ok[2], in({})}, {{"vocab", int64_t{37}}}),
             Catch::Contains("offset"));
  std::vector<OperandType> grad = ok;
  for (int i = 0; i < 3; ++i) grad.push_back(in({4}));
  CHECK(error_of(OpId::LinearCrossEntropyStatsGrad, grad, {{"vocab", int64_t{37}}}) == "no error");
  grad[5] = in({5});
  CHECK_THAT(error_of(OpId::LinearCrossEntropyStatsGrad, grad, {{"vocab", int64_t{37}}}),
             Catch::Contains("input 6 (its cotangent) is f32[5]; expected f32[4]"));
}
