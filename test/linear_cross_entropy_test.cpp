// linear_cross_entropy and linear_cross_entropy_grad (passes/fuse_head.h):
// the CPU's chunked kernels against the op's decomposition (linear then
// cross_entropy, and what autodiff makes of it) run on the CPU, and both
// against the float64 reference executor, on shapes the chunking has to get
// right: a vocabulary no chunk divides, rows no chunk divides, one chunk, a
// chunk of one row; f32 to 1e-6, bf16 to bf16's precision.
#include <catch2/catch.hpp>

#include <string>

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
  if (op == OpId::LinearCrossEntropyGrad) {
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
    for (OpId op : {OpId::LinearCrossEntropy, OpId::LinearCrossEntropyGrad}) {
      INFO(op_name(op) << " " << label(c, DType::f32));
      const std::vector<Value> args = head_values(r, c, DType::f32, op == OpId::LinearCrossEntropyGrad);
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
    for (OpId op : {OpId::LinearCrossEntropy, OpId::LinearCrossEntropyGrad}) {
      INFO(op_name(op) << " " << label(c, DType::bf16));
      const std::vector<Value> args = head_values(r, c, DType::bf16, op == OpId::LinearCrossEntropyGrad);
      const Trace fused = head_trace(op, c, DType::bf16, false);
      const Trace decomposed = head_trace(op, c, DType::bf16, true);
      // The loss is f32; the gradients are h's and w's bf16.
      CHECK(fused.bsyms.back().outputs[0].type.dtype ==
            (op == OpId::LinearCrossEntropy ? DType::f32 : DType::bf16));
      REQUIRE(cpu_executor().claims(fused.bsyms.back()));
      const std::vector<Value> want = reference::run(fused, args);
      const std::vector<Value> got = CpuRunner().run(fused, args);
      const std::vector<Value> got_dec = CpuRunner(true).run(decomposed, args);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        INFO("output " << i);
        // The same roundings as the unfused bf16 head: to f32's precision
        // beside it, a bf16 rounding or two (2^-8) each beside float64.
        check_close(got[i], got_dec[i], i == 0 && op == OpId::LinearCrossEntropy ? 1e-6 : 1e-2, 0.1);
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
