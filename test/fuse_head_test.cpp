// fuse_head (passes/fuse_head.h): which heads it fuses and which it leaves,
// and, through the whole pipeline, that a fused model's traces hold no
// [tokens, vocab] value at any stage after it: GPT-2 (tied wte), Llama
// (untied lm_head) and Qwen2 (untied and tied), zero3 on 1 and 2 ranks, with remat and bf16; --loss-chunk
// off keeps today's head (so the walk can fail); under --tp 2 (with sequence
// parallelism, a padded vocabulary) no [tokens, V/tp] value either.
#include <catch2/catch.hpp>

#include <string>

#include <algorithm>
#include <memory>

#include "frontend/model.h"
#include "frontend/models/gpt2/gpt2.h"
#include "frontend/models/llama/llama.h"
#include "frontend/models/registry.h"
#include "ir/builder.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/fuse_head.h"
#include "passes/pipeline.h"

using namespace fsdpc;

namespace {

TensorType tt(Shape s, DType d = DType::f32, Device dev = {}) {
  TensorType t;
  t.shape = std::move(s);
  t.dtype = d;
  t.device = dev;
  return t;
}

// h [3, 4] -> a head over a vocabulary of 5 -> cross_entropy, spelled by
// `head` ("linear", "biased", "matmul"); `return_logits` also returns them.
Trace head_trace(const std::string& head, bool return_logits = false, Device dev = {}) {
  Trace t;
  t.name = "computation";
  TraceBuilder b(t);
  b.add_arg(Proxy{"h", tt({3, 4}, DType::f32, dev), "", false});
  b.add_arg(Proxy{"w", tt({5, 4}, DType::f32, dev), "w", false});
  b.add_arg(Proxy{"bias", tt({5}, DType::f32, dev), "bias", false});
  b.add_arg(Proxy{"targets", tt({3}, DType::i64, dev), "", false});
  Proxy x = b.emit1(OpId::Tanh, {Operand::of("h")});
  Proxy logits;
  if (head == "linear") {
    logits = b.emit1(OpId::Linear, {Operand::of(x.name), Operand::of("w")});
  } else if (head == "biased") {
    logits = b.emit1(OpId::Linear, {Operand::of(x.name), Operand::of("w"), Operand::of("bias")});
  } else {
    Proxy wt = b.emit1(OpId::Permute, {Operand::of("w")}, Attrs{{"dims", IntList{1, 0}}});
    logits = b.emit1(OpId::Matmul, {Operand::of(x.name), Operand::of(wt.name)});
  }
  Proxy loss = b.emit1(OpId::CrossEntropy, {Operand::of(logits.name), Operand::of("targets")});
  t.returns = return_logits ? ReturnTree::tuple({ReturnTree::leaf(loss.name), ReturnTree::leaf(logits.name)})
                            : ReturnTree::leaf(loss.name);
  return t;
}

int count_op(const Trace& t, OpId op) {
  int n = 0;
  for (const BoundSymbol& b : t.bsyms) n += b.op == op;
  return n;
}

// A top-level value (argument or statement output) the size and shape of
// the logits: [.., vocab] with tokens * vocab elements, or those flattened.
std::string logits_sized_value(const Trace& t, int64_t tokens, int64_t vocab) {
  auto is_logits = [&](const TensorType& type) {
    const Shape& s = type.shape;
    return numel(s) == tokens * vocab && !s.empty() && (s.back() == vocab || s.size() == 1);
  };
  for (const Proxy& a : t.args)
    if (is_logits(a.type)) return a.name + " (an argument)";
  for (const BoundSymbol& b : t.bsyms)
    for (const Proxy& o : b.outputs)
      if (is_logits(o.type)) return o.name + " = " + std::string(op_name(b.op));
  return "";
}

// Qwen2 (q/k/v biases, the head untied or tied to the embedding) at a
// small size, with a vocabulary of 300.
LlamaConfig qwen2_config(bool tied) {
  LlamaConfig c;
  c.model_type = "qwen2";
  c.vocab_size = 300;
  c.hidden_size = 33;
  c.intermediate_size = 47;
  c.head_dim = 6;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 6;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 32;
  c.rms_norm_eps = 1e-5;
  c.tie_word_embeddings = tied;
  c.qkv_bias = true;
  return c;
}

// gpt2-tiny with a vocabulary of 300, not its 256: gpt2-tiny's MLP is 256
// wide, and its [batch, seq, 256] activations would look like logits.
std::unique_ptr<Model> model_named(const std::string& name) {
  if (name == "gpt2-tiny-v300") return std::make_unique<GPT2>(name, GPT2Config{2, 2, 64, 300, 64, 1e-5});
  if (name == "gpt2-tiny-v301") return std::make_unique<GPT2>(name, GPT2Config{2, 2, 64, 301, 64, 1e-5});
  if (name == "qwen2-v300") return std::make_unique<Llama>(name, qwen2_config(false));
  if (name == "qwen2-tied-v300") return std::make_unique<Llama>(name, qwen2_config(true));
  return make_model(name);
}

// Compiles `model` and lists its stages, and the first value of
// [tokens, vocab] elements in a trace of any stage after the captured one
// ("stage: value"; "" when there is none).
struct Walk {
  std::vector<std::string> stages;
  std::string found;
  int stats = 0;
};
// With `tp` > 1, over a mesh of `world` data-parallel ranks times tp, the
// values of tokens x ceil(V / tp) elements; `stats` counts the vocabulary
// slice's ops in the final traces.
Walk walk(const std::string& model, int world, PipelineOptions o, int64_t batch = 2, int64_t seq = 16, int tp = 1) {
  std::unique_ptr<Model> m = model_named(model);
  CaptureOptions c;
  c.batch = batch;
  c.seq = seq;
  const Trace captured = capture(*m, c);
  o.mesh = flat_mesh(world);
  o.mesh.tp = tp;
  o.tensor_parallel_plan = m->tensor_parallel_plan();
  const int64_t vocab = model.ends_with("-v300") ? 300 : model.ends_with("-v301") ? 301 : 256;
  Walk w;
  const std::vector<Stage> stages = compile(captured, o);
  for (const Stage& s : stages) {
    w.stages.push_back(s.name);
    if (s.name == "trace") continue;
    for (const Trace& t : s.traces)
      if (std::string v = logits_sized_value(t, batch * seq, (vocab + tp - 1) / tp); !v.empty() && w.found.empty())
        w.found = s.name + ": " + v;
  }
  for (const Trace& t : stages.back().traces)
    w.stats += count_op(t, OpId::LinearCrossEntropyStats) + count_op(t, OpId::LinearCrossEntropyStatsGrad);
  return w;
}

bool has_stage(const Walk& w, const std::string& name) {
  return std::find(w.stages.begin(), w.stages.end(), name) != w.stages.end();
}

}  // namespace

TEST_CASE("fuse_head fuses linear(h, w) and matmul(h, permute(w)) feeding cross_entropy, on the CPU and on CUDA",
          "[fuse_head]") {
  for (const std::string head : {"linear", "matmul"}) {
    INFO(head);
    const Trace t = head_trace(head);
    const Trace f = fuse_head(t, LossChunk{});
    INFO(print_trace(f));
    CHECK_NOTHROW(verify(f));
    CHECK(f.provenance == "fuse_head");
    CHECK(count_op(f, OpId::LinearCrossEntropy) == 1);
    CHECK(count_op(f, OpId::CrossEntropy) == 0);
    CHECK(count_op(f, OpId::Linear) == 0);
    CHECK(count_op(f, OpId::Matmul) == 0);
    CHECK(count_op(f, OpId::Permute) == 0);  // used by the product only
    CHECK(count_op(f, OpId::Tanh) == 1);
    const BoundSymbol& lce = f.bsyms.back();
    REQUIRE(lce.op == OpId::LinearCrossEntropy);
    CHECK(lce.inputs[1].name == "w");
    CHECK(lce.inputs[2].name == "targets");
    CHECK_FALSE(lce.attrs.has("chunk"));
    // The loss keeps its name, so the returns are untouched.
    CHECK(lce.output().name == t.bsyms.back().output().name);
    CHECK(f.returns == t.returns);
  }
  // On a CUDA device too: its executor has the kernels (executors/cuda/cuda_head.cpp).
  const Device gpu{DeviceKind::cuda, 0};
  const Trace on_gpu = fuse_head(head_trace("linear", false, gpu), LossChunk{});
  REQUIRE(count_op(on_gpu, OpId::LinearCrossEntropy) == 1);
  CHECK(count_op(on_gpu, OpId::Linear) == 0);
  CHECK(on_gpu.bsyms.back().output().type.device == gpu);
  const Trace chunked = fuse_head(head_trace("linear"), LossChunk{true, 7});
  REQUIRE(count_op(chunked, OpId::LinearCrossEntropy) == 1);
  CHECK(chunked.bsyms.back().attrs.get_int("chunk") == 7);
}

TEST_CASE("fuse_head leaves a head it cannot fuse as it is", "[fuse_head]") {
  auto unchanged = [](const Trace& t) {
    const Trace f = fuse_head(t, LossChunk{});
    CHECK(f == t);
    CHECK(count_op(f, OpId::LinearCrossEntropy) == 0);
  };
  SECTION("a bias") { unchanged(head_trace("biased")); }
  SECTION("the logits used elsewhere") { unchanged(head_trace("linear", true)); }
  SECTION("--loss-chunk off") { CHECK(fuse_head(head_trace("linear"), LossChunk{false, 0}) == head_trace("linear")); }
}

TEST_CASE("fused GPT-2, Llama and Qwen2 hold no [tokens, vocab] value after fuse_head at any stage; off keeps the logits",
          "[fuse_head][pipeline]") {
  for (const std::string model : {"gpt2-tiny-v300", "llama-tiny", "qwen2-v300", "qwen2-tied-v300"})
    for (int world : {1, 2}) {
      INFO(model << " on " << world << " ranks");
      PipelineOptions o;
      const Walk fused = walk(model, world, o);
      CHECK(has_stage(fused, "fuse_head"));
      CHECK(fused.found == "");
      o.remat.mode = RematMode::block;
      CHECK(walk(model, world, o).found == "");
      o.remat.mode = RematMode::none;
      o.precision = DType::bf16;
      CHECK(walk(model, world, o).found == "");
      o.precision = DType::f32;
      o.loss_chunk.fuse = false;
      const Walk off = walk(model, world, o);
      CHECK_FALSE(has_stage(off, "fuse_head"));
      CHECK(off.found != "");  // the walk sees the unfused logits
    }
}

// Under tp each rank holds ceil(V / T) classes of the head: with the head
// fused no value holds tokens x that many either (linear_cross_entropy_stats
// holds a [chunk, V/T] block inside its kernel), with and without sequence
// parallelism and with a padded vocabulary; --loss-chunk off keeps tp's
// vocabulary-parallel logits, which the walk finds.
TEST_CASE("fused GPT-2 and Llama under --tp 2 hold no [tokens, V/tp] value; off keeps the logits",
          "[fuse_head][tp][pipeline]") {
  for (const std::string model : {"gpt2-tiny-v300", "gpt2-tiny-v301", "llama-tiny"})
    for (bool sp : {false, true}) {
      INFO(model << (sp ? " --sequence-parallel" : ""));
      PipelineOptions o;
      o.sequence_parallel = sp;
      const Walk fused = walk(model, 1, o, 2, 16, 2);
      CHECK(has_stage(fused, "fuse_head"));
      CHECK(fused.stats == 2);  // the slice's statistics and their gradient
      CHECK(fused.found == "");
      o.precision = DType::bf16;
      CHECK(walk(model, 1, o, 2, 16, 2).found == "");
      o.precision = DType::f32;
      o.remat.mode = RematMode::block;
      CHECK(walk(model, 1, o, 2, 16, 2).found == "");
      o.remat.mode = RematMode::none;
      o.loss_chunk.fuse = false;
      const Walk off = walk(model, 1, o, 2, 16, 2);
      CHECK(off.stats == 0);
      CHECK(off.found != "");
    }
}
