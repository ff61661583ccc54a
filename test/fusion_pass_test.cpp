// The fuse pass on real execution traces: regions are verified, print and
// parse back, never reorder a statement (so the communication schedule is
// the one schedule() chose), allocate only values used outside, and lower
// the trace's peak live bytes. With bf16 (autocast), the converts around a
// matmul join the regions beside them, and bf16 arithmetic stays out.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <unordered_map>
#include <unordered_set>

#include "executors/claim.h"
#include "executors/fusion/fusion_kernel.h"
#include "executors/fusion/region.h"
#include "ir/builder.h"
#include "frontend/models/registry.h"
#include "ir/json.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/fold_transpose.h"
#include "passes/fuse.h"
#include "passes/pipeline.h"
#include "passes/place.h"
#include "passes/stats.h"
#include "test/fusion_check.h"

using namespace fsdpc;

namespace {

std::vector<Trace> final_traces(const std::string& model) {
  CaptureOptions co;
  if (model != "mlp") {
    co.batch = 2;
    co.seq = 16;
  }
  PipelineOptions o;
  o.mesh = flat_mesh(2);
  o.bucketing = true;
  return compile(place(capture(*make_model(model), co), Device{}), o).back().traces;
}

// The statements in order with regions opened up and dels left out; a
// composite of `t` counts as its decomposition when `fused` holds that
// decomposition's first statement (fuse inlined it).
std::vector<std::string> flat_statements(const Trace& t, const Trace* fused = nullptr) {
  std::unordered_set<std::string> inner;
  if (fused)
    for (const BoundSymbol& b : fused->bsyms)
      if (b.op == OpId::Fusion)
        for (const BoundSymbol& s : b.subsymbols) inner.insert(s.outputs[0].name);
  std::vector<std::string> out;
  for (const BoundSymbol& b : t.bsyms) {
    if (b.op == OpId::Del) continue;
    const bool open = b.op == OpId::Fusion || (!b.subsymbols.empty() && inner.count(b.subsymbols[0].outputs[0].name));
    if (!open) {
      out.push_back(b.outputs.empty() ? "?" : b.outputs[0].name);
      continue;
    }
    for (const BoundSymbol& s : b.subsymbols) out.push_back(s.outputs[0].name);
  }
  return out;
}

// The collectives and waits in order, by what they define.
std::vector<std::string> comm_order(const Trace& t) {
  std::vector<std::string> out;
  for (const BoundSymbol& b : t.bsyms)
    if (op_info(b.op).category == OpCategory::collective) out.push_back(b.outputs[0].name);
  return out;
}

}  // namespace

TEST_CASE("fuse: gpt2-tiny zero3 regions verify, round-trip and keep the collective and wait order", "[fusion]") {
  for (const std::string model : {"mlp", "gpt2-tiny"}) {
    for (const Trace& t : final_traces(model)) {
      INFO(model << " " << t.name);
      const Trace exec = execution_trace(t, Target::cpu);
      const Trace fused = execution_trace(t, Target::cpu, FusionMode::automatic);
      REQUIRE_NOTHROW(verify(fused));
      CHECK(fused.provenance == "fusion");
      // Every statement once; only compute moves, and only earlier into a
      // region, so the collectives and waits keep the schedule's order.
      std::vector<std::string> got = flat_statements(fused), want = flat_statements(exec, &fused);
      CHECK(comm_order(fused) == comm_order(exec));
      // No statement that ran after a collective's issue runs before it,
      // and every statement that ran before a wait still does.
      for (const BoundSymbol& c : exec.bsyms) {
        if (op_info(c.op).category != OpCategory::collective) continue;
        const std::string& name = c.outputs[0].name;
        auto before = [&](const std::vector<std::string>& order) {
          std::unordered_set<std::string> set;
          for (const std::string& n : order) {
            if (n == name) break;
            set.insert(n);
          }
          return set;
        };
        const std::unordered_set<std::string> in_fused = before(got), in_exec = before(want);
        INFO(op_name(c.op) << " " << name);
        if (c.op == OpId::Wait) {
          for (const std::string& n : in_exec) CHECK(in_fused.count(n));
        } else {
          for (const std::string& n : in_fused) CHECK(in_exec.count(n));
        }
      }
      std::sort(got.begin(), got.end());
      std::sort(want.begin(), want.end());
      CHECK(got == want);
      CHECK(parse_trace(print_trace(fused)) == fused);
      CHECK(trace_from_json(trace_to_json(fused)) == fused);
      int regions = 0;
      for (const BoundSymbol& b : fused.bsyms) {
        if (b.op != OpId::Fusion) continue;
        ++regions;
        CHECK(b.executor == "cpu");
        CHECK(b.subsymbols.size() >= 2);
        // A matmul holding the transposes it reads (passes/fold_transpose.h).
        if (transposed_matmul(b)) continue;
        for (const BoundSymbol& s : b.subsymbols) {
          CHECK(s.executor.empty());
          CHECK((op_info(s.op).category == OpCategory::elementwise || s.op == OpId::BroadcastInDim ||
                 s.op == OpId::Sum || s.op == OpId::Amax));
        }
      }
      if (model == "gpt2-tiny") {
        CHECK(regions > 0);
        CHECK(trace_stats(fused).peak_live_bytes <= trace_stats(exec).peak_live_bytes);
      }
      // Printed as Thunder prints its regions: numbered in the trace.
      if (regions > 0) CHECK(print_trace(fused).find(" = cpu_fusion0(") != std::string::npos);
      // --fusion none changes nothing.
      CHECK(execution_trace(t, Target::cpu, FusionMode::none) == exec);
    }
  }
}

TEST_CASE("fuse: outputs are only the values read outside the region", "[fusion]") {
  const Trace t = parse_trace(R"(# Constructed by exec
def f(x, y):
  # x: "cpu f32[4, 8]"
  # y: "cpu f32[4, 8]"
  t0 = cpu_mul(x, 2.0)  # t0: "cpu f32[4, 8]"
  t1 = cpu_add(t0, y)  # t1: "cpu f32[4, 8]"
  t2 = cpu_tanh(t1)  # t2: "cpu f32[4, 8]"
  t3 = cpu_sum(t2, dims=[0])  # t3: "cpu f32[8]"
  t4 = cpu_neg(t0)  # t4: "cpu f32[4, 8]"
  t5 = cpu_exp(t4)  # t5: "cpu f32[4, 8]"
  return t3, t5
)");
  const Trace fused = fuse(t, Target::cpu);
  REQUIRE_NOTHROW(verify(fused));
  REQUIRE(fused.bsyms.size() >= 3);
  const BoundSymbol& r0 = fused.bsyms[0];
  REQUIRE(r0.op == OpId::Fusion);
  std::vector<std::string> outs;
  for (const Proxy& p : r0.outputs) outs.push_back(p.name);
  // The region grows past the column sum t3, which stays after it: t0 and
  // t1 die inside; t2 (read by t3) and t5 (returned) are its outputs.
  CHECK(outs == std::vector<std::string>{"t2", "t5"});
  const std::string text = print_trace(fused);
  INFO(text);
  CHECK(text.find("t2, t5 = cpu_fusion0(x, y)") != std::string::npos);
  CHECK(text.find("t5 = cpu_fusion0") < text.find("t3 = cpu_sum(t2, dims=[0])"));
}

namespace {

Proxy convert(TraceBuilder& b, const std::string& x, DType to) {
  return b.emit1(OpId::ConvertElementType, {Operand::of(x)}, Attrs{{"dtype", std::string(dtype_name(to))}});
}

std::vector<std::string> names(const std::vector<Proxy>& ps) {
  std::vector<std::string> out;
  for (const Proxy& p : ps) out.push_back(p.name);
  return out;
}

std::vector<std::string> names(const std::vector<Operand>& os) {
  std::vector<std::string> out;
  for (const Operand& o : os) out.push_back(o.name);
  return out;
}

}  // namespace

// What autocast makes of ln -> linear -> bias + gelu: the layer_norm's f32
// result converted to bf16 for the matmul, the weight converted too, the
// bf16 matmul, its result back to f32 for the bias and gelu. The converts
// join the regions beside them, so neither the normalised f32 value nor the
// widened matmul output is ever stored.
TEST_CASE("fuse: autocast's bf16 converts join the layer_norm and the bias + gelu regions", "[fusion][bf16]") {
  Trace t;
  TraceBuilder b(t);
  const Proxy x = b.add_arg(test::arg("x", test::tt({16, 24})));
  const Proxy w = b.add_arg(test::arg("w", test::tt({24})));
  const Proxy c = b.add_arg(test::arg("c", test::tt({24})));
  const Proxy wm = b.add_arg(test::arg("wm", test::tt({24, 32})));
  const Proxy bias = b.add_arg(test::arg("bias", test::tt({32})));
  const Proxy ln = b.emit1(OpId::LayerNorm, {Operand::of(x.name), Operand::of(w.name), Operand::of(c.name)},
                           {{"eps", 1e-5}});
  const Proxy lb = convert(b, ln.name, DType::bf16);
  const Proxy wb = convert(b, wm.name, DType::bf16);
  const Proxy mm = b.emit1(OpId::Matmul, {Operand::of(lb.name), Operand::of(wb.name)});
  REQUIRE(mm.type.dtype == DType::bf16);
  const Proxy mf = convert(b, mm.name, DType::f32);
  const Proxy bb = b.emit1(OpId::BroadcastInDim, {Operand::of(bias.name)},
                           {{"shape", IntList{16, 32}}, {"broadcast_dims", IntList{1}}});
  const Proxy a = b.emit1(OpId::Add, {Operand::of(mf.name), Operand::of(bb.name)});
  const Proxy g = b.emit1(OpId::Gelu, {Operand::of(a.name)}, {{"approximate", std::string("tanh")}});
  t.returns = ReturnTree::tuple({ReturnTree::leaf(g.name)});
  const Trace fused = test::fuse_bf16(t);
  const std::string text = print_trace(fused);
  INFO(text);
  std::vector<const BoundSymbol*> body;
  for (const BoundSymbol& s : fused.bsyms)
    if (s.op != OpId::Del) body.push_back(&s);
  REQUIRE(body.size() == 4);
  // ln's region: loads f32, stores only the bf16 operand of the matmul.
  REQUIRE(body[0]->op == OpId::Fusion);
  CHECK(names(body[0]->inputs) == std::vector<std::string>{"x", "w", "c"});
  CHECK(names(body[0]->outputs) == std::vector<std::string>{lb.name});
  CHECK(body[0]->subsymbols.back().op == OpId::ConvertElementType);
  // The weight's convert, alone: another shape, a statement of its own.
  CHECK(body[1]->op == OpId::ConvertElementType);
  CHECK(body[2]->op == OpId::Matmul);
  // The matmul's bf16 result loaded and widened, biased and gelu'd in f32.
  REQUIRE(body[3]->op == OpId::Fusion);
  CHECK(names(body[3]->inputs) == std::vector<std::string>{mm.name, "bias"});
  CHECK(names(body[3]->outputs) == std::vector<std::string>{g.name});
  CHECK(body[3]->subsymbols[0].op == OpId::ConvertElementType);
  // The regions are loop nests: bf16 is a load of the second, a store of the first.
  std::unordered_map<std::string, TensorType> types;
  for (const Proxy& p : fused.args) types[p.name] = p.type;
  types[mm.name] = mm.type;
  auto region_of = [&](const BoundSymbol& r) {
    std::vector<TensorType> in;
    for (const Operand& o : r.inputs) in.push_back(types.at(o.name));
    return fusion::describe_region(r, in);
  };
  const fusion::Region r0 = region_of(*body[0]), r3 = region_of(*body[3]);
  CHECK(r0.steps[static_cast<size_t>(r0.outputs.at(0))].dtype == DType::bf16);
  CHECK(r3.loads.at(0).dtype == DType::bf16);
  CHECK(parse_trace(text) == fused);
}

// bf16 arithmetic has the unfused kernels' own rounding points, which a
// region computing in f32 would not keep: it stays out, and so does a sum
// whose output is bf16. Their converts still fuse with their f32 neighbours.
TEST_CASE("fuse: bf16 arithmetic and bf16 reductions stay out of regions", "[fusion][bf16]") {
  Trace t;
  TraceBuilder b(t);
  const Proxy x = b.add_arg(test::arg("x", test::tt({8, 12})));
  const Proxy xb = convert(b, b.emit1(OpId::Exp, {Operand::of(x.name)}).name, DType::bf16);
  const Proxy y = b.emit1(OpId::Mul, {Operand::of(xb.name), Operand::of(xb.name)});  // bf16 arithmetic
  const Proxy s = b.emit1(OpId::Sum, {Operand::of(y.name)}, {{"dims", IntList{1}}});  // a bf16 row sum
  const Proxy z = b.emit1(OpId::Tanh, {Operand::of(convert(b, y.name, DType::f32).name)});
  t.returns = ReturnTree::tuple({ReturnTree::leaf(s.name), ReturnTree::leaf(z.name)});
  const Trace fused = test::fuse_bf16(t);
  INFO(print_trace(fused));
  std::vector<const BoundSymbol*> body;
  for (const BoundSymbol& st : fused.bsyms)
    if (st.op != OpId::Del) body.push_back(&st);
  REQUIRE(body.size() == 4);
  CHECK(body[0]->op == OpId::Fusion);  // exp -> bf16
  CHECK(names(body[0]->outputs) == std::vector<std::string>{xb.name});
  CHECK(body[1]->op == OpId::Mul);
  CHECK(body[2]->op == OpId::Sum);
  CHECK(body[3]->op == OpId::Fusion);  // -> f32 -> tanh
}

TEST_CASE("fuse: --fusion takes none or auto", "[fusion]") {
  CHECK_FALSE(parse_fusion_mode("fast"));
  CHECK(parse_fusion_mode("none") == FusionMode::none);
  CHECK(parse_fusion_mode("auto") == FusionMode::automatic);
  for (FusionMode m : {FusionMode::none, FusionMode::automatic}) CHECK(parse_fusion_mode(fusion_mode_name(m)) == m);
  CHECK(fusion_mode_names() == std::vector<std::string>{"none", "auto"});
}

// Run by hand (`fusion_pass_test "[jit_time]"`): the JIT compile time of every
// region of gpt2 (124M), zero3 on 8 ranks, batch 1 x 1024, cold cache.
TEST_CASE("fuse: JIT compile time of every gpt2 region", "[.][jit_time]") {
  CaptureOptions co;
  co.batch = 1;
  co.seq = 1024;
  PipelineOptions o;
  o.mesh = flat_mesh(8);
  o.bucketing = true;
  const std::vector<Trace> traces =
      compile(place(capture(*make_model("gpt2"), co), Device{}), o).back().traces;
  int regions = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const Trace& t : traces) {
    const Trace fused = execution_trace(t, Target::cpu, FusionMode::automatic);
    for (const auto& [b, in] : test::loop_regions(fused)) {
      fusion::precompile(*b, in);
      ++regions;
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const fusion::JitCacheStats st = fusion::jit_cache_stats();
  std::printf("gpt2 zero3 w8: %d regions, %lld distinct compiled in %.3f s (%.1f ms each); %.3f s in all\n", regions,
              static_cast<long long>(st.compiled), st.compile_s, 1e3 * st.compile_s / std::max<int64_t>(1, st.compiled),
              s);
  CHECK(regions > 0);
}
