// The fuse pass on real execution traces: regions are verified, print and
// parse back, never reorder a statement (so the communication schedule is
// the one schedule() chose), allocate only values used outside, and lower
// the trace's peak live bytes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <unordered_map>
#include <unordered_set>

#include "executors/claim.h"
#include "executors/fusion/fusion_kernel.h"
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
