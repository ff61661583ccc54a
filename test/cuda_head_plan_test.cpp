// The fused head on the CUDA executor, what needs no GPU: the chunk and
// scratch plan (executors/cuda/head_plan.h) that the kernels take their
// block by and the executor's scratch_bytes reports to the memory plan, the
// same function for both; and, through the pipeline, that a model placed on
// a CUDA device gets fuse_head's ops and that the CUDA executor claims them
// (cuda_head.cpp), so no [tokens, vocab] value is left to run, and
// that `fsdpc dump --memory --executor cuda` counts the head's block. The
// kernels themselves are compared with the CPU's in
// test/gpu/gpu_nn_kernels_test.cpp on a GPU.
#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "executors/claim.h"
#include "executors/cuda/cuda_executor.h"
#include "executors/cuda/head_plan.h"
#include "frontend/models/registry.h"
#include "ir/builder.h"
#include "ir/printer.h"
#include "passes/pipeline.h"
#include "passes/place.h"
#include "test/run_cli.h"
#include "test/scratch.h"

using namespace fsdpc;
using fsdpc::cuda::HeadPlan;
using fsdpc::cuda::kHeadAlign;
using fsdpc::cuda::plan_head;

namespace {

const Device kGpu{DeviceKind::cuda, 0};

TensorType tt(Shape s, DType d) {
  TensorType t;
  t.shape = std::move(s);
  t.dtype = d;
  t.device = kGpu;
  return t;
}

// One head statement over h `h_shape` and w [v, c] of dtype `d` on cuda:0,
// its inputs as the op takes them; the trace keeps the statement whole.
struct HeadCase {
  Trace t;
  std::vector<TensorType> in;
  const BoundSymbol& op() const { return t.bsyms.back(); }
  std::vector<const TensorType*> in_ptrs() const {
    std::vector<const TensorType*> p;
    for (const TensorType& x : in) p.push_back(&x);
    return p;
  }
};

HeadCase head_case(OpId op, Shape h_shape, int64_t v, int64_t c, DType d, Attrs attrs = {}) {
  HeadCase hc;
  Shape rows = h_shape;
  rows.pop_back();
  const DType loss = d == DType::bf16 ? DType::f32 : d;
  hc.in = {tt(h_shape, d), tt({v, c}, d), tt(rows, DType::i64)};
  const bool slice = op == OpId::LinearCrossEntropyStats || op == OpId::LinearCrossEntropyStatsGrad;
  if (op == OpId::LinearCrossEntropyGrad) hc.in.push_back(tt({}, loss));
  if (slice) {
    hc.in.push_back(tt({}, DType::i64));
    attrs.set("vocab", v + 3);
  }
  if (op == OpId::LinearCrossEntropyStatsGrad)
    for (int i = 0; i < 3; ++i) hc.in.push_back(tt(rows, loss));
  TraceBuilder b(hc.t, TraceBuilder::Options{false});
  std::vector<Operand> operands;
  for (size_t i = 0; i < hc.in.size(); ++i)
    operands.push_back(Operand::of(b.add_arg(Proxy{"x" + std::to_string(i), hc.in[i], "", true}).name));
  b.emit(op, std::move(operands), std::move(attrs));
  return hc;
}

int64_t aligned(int64_t bytes) { return (bytes + kHeadAlign - 1) / kHeadAlign * kHeadAlign; }

// The executor reports the block the kernels take: the same plan.
HeadPlan planned(const HeadCase& hc) {
  const HeadPlan p = plan_head(hc.op(), hc.in[0], hc.in[1]);
  CHECK(cuda_executor().scratch_bytes(hc.op(), hc.in_ptrs()) == p.bytes);
  for (int64_t at : {p.zb_at, p.dw_at, p.losses_at, p.bytes}) CHECK(at % kHeadAlign == 0);
  CHECK(p.zb_at <= p.dw_at);
  CHECK(p.dw_at <= p.losses_at);
  CHECK(p.losses_at <= p.bytes);
  return p;
}

}  // namespace

TEST_CASE("plan_head: the chunk from the attribute, else 32 MiB of f32 logits, at most the rows",
          "[cuda][fuse_head]") {
  // GPT-2's vocabulary: 166 rows of 50257 f32 logits fit 32 MiB.
  HeadPlan p = planned(head_case(OpId::LinearCrossEntropy, {4, 100, 8}, 50257, 8, DType::f32));
  CHECK(p.rows == 400);
  CHECK(p.chunk == 166);
  CHECK(p.chunk * 50257 * 4 <= cuda::kHeadChunkBytes);
  CHECK((p.chunk + 1) * 50257 * 4 > cuda::kHeadChunkBytes);
  p = planned(head_case(OpId::LinearCrossEntropy, {4, 100, 8}, 50257, 8, DType::f32, Attrs{{"chunk", int64_t{7}}}));
  CHECK(p.chunk == 7);
  p = planned(head_case(OpId::LinearCrossEntropy, {3, 5}, 11, 5, DType::f32, Attrs{{"chunk", int64_t{1000}}}));
  CHECK(p.chunk == 3);  // one chunk of every row
  p = planned(head_case(OpId::LinearCrossEntropy, {0, 5}, 11, 5, DType::f32));
  CHECK(p.rows == 0);
  CHECK(p.chunk == 1);
  // No features: the rows are still h's leading dims.
  p = planned(head_case(OpId::LinearCrossEntropy, {2, 3, 0}, 11, 0, DType::f32));
  CHECK(p.rows == 6);
}

TEST_CASE("plan_head: the block's parts per op and dtype", "[cuda][fuse_head]") {
  const int64_t v = 1031, c = 24;
  const Attrs chunk{{"chunk", int64_t{5}}};
  const int64_t logits = aligned(5 * v * 4), bf16_copy = aligned(5 * v * 2);
  // The forward: the logits, then the row losses (f64) of linear_cross_entropy.
  HeadPlan p = planned(head_case(OpId::LinearCrossEntropy, {2, 13, c}, v, c, DType::f32, chunk));
  CHECK(p.losses_at == logits);
  CHECK(p.bytes == logits + aligned(26 * 8));
  CHECK_FALSE(p.bf16);
  p = planned(head_case(OpId::LinearCrossEntropy, {2, 13, c}, v, c, DType::bf16, chunk));
  CHECK(p.bf16);
  CHECK(p.bytes == logits + aligned(26 * 8));
  p = planned(head_case(OpId::LinearCrossEntropyStats, {2, 13, c}, v, c, DType::bf16, chunk));
  CHECK(p.bytes == logits);  // lse and the target logit are outputs
  // The backward in f32: the cotangent in place, dw accumulated in dw itself.
  for (OpId op : {OpId::LinearCrossEntropyGrad, OpId::LinearCrossEntropyStatsGrad}) {
    INFO(op_name(op));
    p = planned(head_case(op, {2, 13, c}, v, c, DType::f32, chunk));
    CHECK(p.bytes == logits);
    CHECK_FALSE(p.narrow_dw);
    // bf16: the cotangent's bf16 copy and dw's f32 accumulator.
    p = planned(head_case(op, {2, 13, c}, v, c, DType::bf16, chunk));
    CHECK(p.narrow_dw);
    CHECK(p.zb_at == logits);
    CHECK(p.dw_at == logits + bf16_copy);
    CHECK(p.bytes == logits + bf16_copy + aligned(v * c * 4));
    // dw_dtype=f32 (widen_accumulation): dw is its own accumulator.
    Attrs wide = chunk;
    wide.set("dw_dtype", std::string("f32"));
    p = planned(head_case(op, {2, 13, c}, v, c, DType::bf16, wide));
    CHECK_FALSE(p.narrow_dw);
    CHECK(p.bytes == logits + bf16_copy);
  }
}

TEST_CASE("the CUDA executor reports scratch only for the fused head", "[cuda][fuse_head]") {
  Trace t;
  TraceBuilder b(t, TraceBuilder::Options{false});
  const TensorType x = tt({4, 8}, DType::f32), w = tt({16, 8}, DType::f32);
  b.emit(OpId::Linear, {Operand::of(b.add_arg(Proxy{"x", x, "", true}).name),
                        Operand::of(b.add_arg(Proxy{"w", w, "", true}).name)});
  CHECK(cuda_executor().scratch_bytes(t.bsyms.back(), {&x, &w}) == 0);
  CHECK(cuda::is_head_op(OpId::LinearCrossEntropyStatsGrad));
  CHECK_FALSE(cuda::is_head_op(OpId::CrossEntropy));
}

// gpt2-tiny placed on cuda:0 and compiled (zero3 over 2 ranks; tp 2): the
// execution traces run the fused head's ops on the CUDA executor (without
// tp the loss and its gradients as one forward statement,
// head_grad_forward), and no statement is left of the unfused head's
// cross_entropy.
TEST_CASE("on a CUDA device fuse_head fuses the head and the CUDA executor claims its ops", "[cuda][fuse_head]") {
  for (int tp : {1, 2})
    for (DType precision : {DType::f32, DType::bf16}) {
      INFO("tp " << tp << ", " << dtype_name(precision));
      const std::unique_ptr<Model> m = make_model("gpt2-tiny");
      CaptureOptions co;
      co.batch = 2;
      co.seq = 16;
      PipelineOptions o;
      o.mesh = flat_mesh(tp == 1 ? 2 : 1);
      o.mesh.tp = tp;
      o.tensor_parallel_plan = m->tensor_parallel_plan();
      o.precision = precision;
      const std::vector<Stage> stages = compile(place(capture(*m, co), kGpu), o);
      int forward = 0, backward = 0;
      for (const Trace& t : stages.back().traces) {
        const Trace exec = execution_trace(t, Target::cuda);
        for (const BoundSymbol& b : exec.bsyms) {
          CHECK(b.op != OpId::CrossEntropy);
          const bool fwd = b.op == (tp == 1 ? OpId::LinearCrossEntropyWithGrad : OpId::LinearCrossEntropyStats);
          const bool bwd = tp > 1 && b.op == OpId::LinearCrossEntropyStatsGrad;
          CHECK(b.op != OpId::LinearCrossEntropy);
          CHECK(b.op != OpId::LinearCrossEntropyGrad);
          if (!fwd && !bwd) continue;
          INFO(op_name(b.op) << " defining " << b.outputs[0].name);
          CHECK(b.executor == "cuda");
          CHECK(b.outputs[0].type.device == kGpu);
          forward += fwd;
          backward += bwd;
        }
      }
      CHECK(forward == 1);
      CHECK(backward == (tp == 1 ? 0 : 1));
    }
}

// The plan a CUDA run is checked against holds the head's block while the
// head's statement runs (the loss and its gradients in the forward): gpt2-tiny's
// 8 tokens x 256 classes in one chunk, an 8 KiB f32 block, and its 8 row
// losses (f64) beside it.
TEST_CASE("fsdpc dump --memory --executor cuda counts the fused head's scratch", "[cuda][fuse_head][memory_plan]") {
  const std::string out = fsdpc::testing::scratch("plan.json").string();
  const fsdpc::testing::Run r = fsdpc::testing::run_fsdpc(
      "dump --model gpt2-tiny --seq 4 --batch 2 --executor cuda --memory --format json -o '" + out + "'",
      {.merge = true});
  INFO(r.out);
  REQUIRE(r.code == 0);
  std::ifstream in(out);
  const nlohmann::json plan = nlohmann::json::parse(in);
  std::vector<std::string> during;
  for (const nlohmann::json& phase : plan["steady"]["phases"])
    for (const nlohmann::json& p : phase["points"])
      if (const std::string what = p["what"].get<std::string>(); what.find("kernel scratch") != std::string::npos)
        during.push_back(what);
  REQUIRE(during.size() == 1);
  CHECK_THAT(during[0], Catch::Contains("cuda_linear_cross_entropy_with_grad(") &&
                            Catch::Contains("8.2 KiB of kernel scratch"));
}
