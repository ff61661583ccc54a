// head_grad_forward (passes/head_grad_forward.h): which fused heads get
// their gradients in the forward (GPT-2's tied head and Llama's untied one,
// on 1 and 2 ranks, f32 and bf16) and which keep the recomputing gradient (a
// loss scaled after the head, a pipeline stage, the head unfused); and
// without_head_grads, the evaluation's forward from a compiled training
// forward. The numbers (training and evaluation against the unfused head)
// are fused_head_train_cli_test's and memory_plan_test's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>

#include "frontend/model.h"
#include "frontend/models/registry.h"
#include "ir/builder.h"
#include "ir/verifier.h"
#include "passes/fuse_head.h"
#include "passes/grad.h"
#include "passes/head_grad_forward.h"
#include "passes/pipeline.h"

using namespace fsdpc;

namespace {

TensorType tt(Shape s, DType d = DType::f32) {
  TensorType t;
  t.shape = std::move(s);
  t.dtype = d;
  return t;
}

int count_op(const Trace& t, OpId op) {
  return static_cast<int>(std::count_if(t.bsyms.begin(), t.bsyms.end(), [&](const BoundSymbol& b) { return b.op == op; }));
}

bool has_arg(const Trace& t, const std::string& name) {
  return std::any_of(t.args.begin(), t.args.end(), [&](const Proxy& a) { return a.name == name; });
}

bool reads(const Trace& t, const std::string& name) {
  for (const BoundSymbol& b : t.bsyms)
    for (const Operand& in : b.inputs)
      if (!in.is_scalar() && in.name == name) return true;
  return false;
}

std::vector<Stage> compiled(const std::string& model, int world, PipelineOptions o) {
  std::unique_ptr<Model> m = make_model(model);
  CaptureOptions c;
  c.batch = 2;
  c.seq = 16;
  o.mesh = flat_mesh(world);
  return compile(capture(*m, c), o);
}

bool has_stage(const std::vector<Stage>& stages, const std::string& name) {
  return std::any_of(stages.begin(), stages.end(), [&](const Stage& s) { return s.name == name; });
}

}  // namespace

TEST_CASE("head_grad_forward: the fused head's loss and gradients are one forward statement reading the cotangent",
          "[head_grad_forward][pipeline]") {
  for (const std::string model : {"gpt2-tiny", "llama-tiny"})
    for (int world : {1, 2})
      for (DType precision : {DType::f32, DType::bf16}) {
        INFO(model << " on " << world << " ranks, " << dtype_name(precision));
        PipelineOptions o;
        o.precision = precision;
        const std::vector<Stage> stages = compiled(model, world, o);
        REQUIRE(has_stage(stages, "head_grad_forward"));
        const Trace& forward = stages.back().traces.at(0);
        const Trace& backward = stages.back().traces.at(1);
        CHECK(count_op(forward, OpId::LinearCrossEntropyWithGrad) == 1);
        CHECK(count_op(forward, OpId::LinearCrossEntropy) == 0);
        CHECK(count_op(backward, OpId::LinearCrossEntropyGrad) == 0);
        CHECK(count_op(backward, OpId::LinearCrossEntropyWithGrad) == 0);
        // The cotangent is the forward's now; nothing in the backward reads it.
        CHECK(has_arg(forward, "cotangent"));
        CHECK(reads(forward, "cotangent"));
        CHECK_FALSE(has_arg(backward, "cotangent"));
        // The head's weight is read by the forward only: zero3's backward
        // gathers one parameter fewer (GPT-2's wte, Llama's lm_head).
        const std::string head = model == "gpt2-tiny" ? "t_wte_weight" : "t_lm_head_weight";
        CHECK_FALSE(has_arg(backward, head));
        verify(forward);
        verify(backward);
      }
}

TEST_CASE("head_grad_forward keeps the recomputing gradient where the cotangent is not known in the forward",
          "[head_grad_forward]") {
  SECTION("a loss scaled after the head") {
    Trace t;
    TraceBuilder b(t);
    b.add_arg(Proxy{"h", tt({6, 4}), "", true});
    b.add_arg(Proxy{"w", tt({9, 4}), "w", true});
    b.add_arg(Proxy{"targets", tt({6}, DType::i64), "", false});
    Proxy loss = b.emit1(OpId::LinearCrossEntropy, {Operand::of("h"), Operand::of("w"), Operand::of("targets")});
    Proxy scaled = b.emit1(OpId::Mul, {Operand::of(loss.name), Operand::lit(0.5)});
    t.returns = ReturnTree::leaf(scaled.name);
    const Trace joint = grad(t);
    REQUIRE(count_op(joint, OpId::LinearCrossEntropyGrad) == 1);
    const Trace out = head_grad_forward(joint);
    CHECK(out.provenance == joint.provenance);  // nothing rewritten
    CHECK(count_op(out, OpId::LinearCrossEntropyGrad) == 1);
    CHECK(count_op(out, OpId::LinearCrossEntropyWithGrad) == 0);
  }
  SECTION("the loss itself: rewritten") {
    Trace t;
    TraceBuilder b(t);
    b.add_arg(Proxy{"h", tt({6, 4}), "", true});
    b.add_arg(Proxy{"w", tt({9, 4}), "w", true});
    b.add_arg(Proxy{"targets", tt({6}, DType::i64), "", false});
    Proxy loss = b.emit1(OpId::LinearCrossEntropy, {Operand::of("h"), Operand::of("w"), Operand::of("targets")},
                         Attrs{{"chunk", int64_t{4}}});
    t.returns = ReturnTree::leaf(loss.name);
    const Trace out = head_grad_forward(grad(t));
    CHECK(out.provenance == "head_grad_forward");
    REQUIRE(count_op(out, OpId::LinearCrossEntropyWithGrad) == 1);
    CHECK(count_op(out, OpId::LinearCrossEntropyGrad) == 0);
    const BoundSymbol& with = *std::find_if(out.bsyms.begin(), out.bsyms.end(), [](const BoundSymbol& s) {
      return s.op == OpId::LinearCrossEntropyWithGrad;
    });
    CHECK(with.outputs[0].name == loss.name);  // the loss keeps its name
    CHECK(with.attrs.get_int("chunk") == 4);
    CHECK(with.inputs[3].name == "cotangent");
    verify(out);
  }
  SECTION("a pipeline stage, and the head unfused") {
    PipelineOptions o;
    o.pp = 2;
    std::unique_ptr<Model> m = make_model("gpt2-tiny");
    CaptureOptions c;
    c.batch = 2;
    c.seq = 16;
    o.mesh = flat_mesh(1);
    for (const std::vector<Stage>& stage : compile_pipeline(capture(*m, c), o)) {
      CHECK_FALSE(has_stage(stage, "head_grad_forward"));
      for (const Trace& t : stage.back().traces) CHECK(count_op(t, OpId::LinearCrossEntropyWithGrad) == 0);
    }
    PipelineOptions off;
    off.loss_chunk.fuse = false;
    CHECK_FALSE(has_stage(compiled("gpt2-tiny", 2, off), "head_grad_forward"));
  }
}

TEST_CASE("without_head_grads: an evaluation's forward computes the loss alone and takes no cotangent",
          "[head_grad_forward]") {
  const std::vector<Stage> stages = compiled("gpt2-tiny", 2, PipelineOptions{});
  const Trace& forward = stages.back().traces.at(0);  // scheduled, frees placed
  REQUIRE(count_op(forward, OpId::LinearCrossEntropyWithGrad) == 1);
  const Trace eval = without_head_grads(forward);
  CHECK(count_op(eval, OpId::LinearCrossEntropyWithGrad) == 0);
  CHECK(count_op(eval, OpId::LinearCrossEntropy) == 1);
  CHECK_FALSE(has_arg(eval, "cotangent"));
  CHECK_FALSE(reads(eval, "cotangent"));  // its free went too
  CHECK(eval.args.size() == forward.args.size() - 1);
  std::vector<std::string> before, after;
  forward.returns.collect_names(before);
  eval.returns.collect_names(after);
  CHECK(after.size() == before.size() - 2);  // dh and dw no longer returned
  CHECK(after.at(0) == before.at(0));        // the loss
  verify(eval);
  // A forward without the statement comes back as it was.
  CHECK(without_head_grads(eval) == eval);
}
