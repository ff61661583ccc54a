// The CUDA fusion executor's code without a GPU: every fusion region of
// gpt2-tiny and gpt2 (zero3) is generated as CUDA C++ (cuda_codegen.h) and
// compiled by NVRTC to a CUBIN for sm_80 and sm_90, so generated GPU code is
// compile-checked on every run. Regions equal in signature (the same layer
// at another depth) compile once, as the executor's cache does. Also the
// CUDA execution traces of gpt2-tiny under bf16 autocast, whose regions load
// and store bf16.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "executors/claim.h"
#include "executors/fusion/cuda_codegen.h"
#include "executors/fusion/nvrtc_compiler.h"
#include "executors/fusion/region.h"
#include "frontend/models/registry.h"
#include "ir/builder.h"
#include "ir/scalar_expr.h"
#include "passes/pipeline.h"
#include "passes/place.h"
#include "test/fusion_check.h"
#include "test/run_cli.h"
#include "test/scratch.h"

using namespace fsdpc;
using namespace fsdpc::fusion;

namespace {

struct Regions {
  int count = 0;                          // fusion statements in all traces
  std::map<std::string, Region> unique;   // by signature
};

Regions regions_of(const std::string& model, int batch, int seq, Target target = Target::cpu,
                   DType precision = DType::f32) {
  CaptureOptions co;
  co.batch = batch;
  if (seq) co.seq = seq;
  PipelineOptions o;
  o.mesh = flat_mesh(2);
  o.bucketing = true;
  o.precision = precision;
  Regions out;
  const std::vector<Trace> traces =
      compile(place(capture(*make_model(model), co), target_device(target)), o).back().traces;
  for (const Trace& t : traces) {
    const Trace fused = execution_trace(t, target, FusionMode::automatic);
    for (const auto& [b, in] : test::loop_regions(fused)) {
      Region r = describe_region(*b, in);
      out.unique.emplace(r.signature(), std::move(r));
      ++out.count;
    }
  }
  return out;
}

void compile_all(const std::string& model, int batch, int seq, Target target = Target::cpu,
                 DType precision = DType::f32) {
  const Regions rs = regions_of(model, batch, seq, target, precision);
  REQUIRE(rs.count > 0);
  int reductions = 0;
  for (const auto& [sig, r] : rs.unique)
    for (const Step& s : r.steps) reductions += s.kind == StepKind::sum || s.kind == StepKind::amax;
  CHECK(reductions > 0);  // layer_norm, softmax and their backward rules are among them
  for (int arch : {80, 90}) {
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& [sig, r] : rs.unique) {
      const CudaKernelSource src = cuda_source(r);
      INFO(model << " sm_" << arch << " " << sig << "\n" << src.source);
      CHECK(src.block % 32 == 0);
      CHECK(src.grid > 0);
      const std::string cubin = nvrtc_cubin(src.source, src.name, arch);
      CHECK(cubin.size() > 64);
      CHECK(cubin.compare(0, 4, "\x7f" "ELF") == 0);
    }
    const double ms = 1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("NVRTC %s: %d regions, %zu unique signatures, sm_%d in %.0f ms (%.0f ms each)\n", model.c_str(),
                rs.count, rs.unique.size(), arch, ms, ms / static_cast<double>(rs.unique.size()));
  }
}

}  // namespace

TEST_CASE("NVRTC: every gpt2-tiny zero3 region compiles for sm_80 and sm_90", "[fusion][nvrtc]") {
  compile_all("gpt2-tiny", 2, 16);
}

TEST_CASE("NVRTC: every gpt2 (124M) zero3 region compiles for sm_80 and sm_90", "[fusion][nvrtc]") {
  compile_all("gpt2", 1, 64);
}

// Autocast's converts around each bf16 matmul join the regions beside them
// on the CUDA target too: regions that load bf16 (a matmul's output) and
// store it (a matmul's operand), as unsigned short bits.
TEST_CASE("NVRTC: every gpt2-tiny bf16 autocast region of the CUDA target compiles", "[fusion][nvrtc][bf16]") {
  const Regions rs = regions_of("gpt2-tiny", 2, 16, Target::cuda, DType::bf16);
  int loads = 0, stores = 0;
  for (const auto& [sig, r] : rs.unique) {
    for (const Load& l : r.loads) loads += l.dtype == DType::bf16;
    for (int o : r.outputs) stores += r.steps[static_cast<size_t>(o)].dtype == DType::bf16;
    const std::string src = cuda_source(r).source;
    for (const Load& l : r.loads)
      if (l.dtype == DType::bf16) CHECK_THAT(src, Catch::Contains("const unsigned short* __restrict__ in" + std::to_string(l.input)));
  }
  CHECK(loads > 0);
  CHECK(stores > 0);
  compile_all("gpt2-tiny", 2, 16, Target::cuda, DType::bf16);
}

TEST_CASE("NVRTC: every llama-tiny zero3 region (RoPE's sin/cos, silu, rms_norm) compiles", "[fusion][nvrtc]") {
  compile_all("llama-tiny", 2, 16);
}

TEST_CASE("NVRTC: every elementwise op alone compiles as the CUDA executor's generated kernel", "[fusion][nvrtc]") {
  // The kernel of an op without a hand-written one (cuda::expr_kernel): the
  // statement alone as a flat region, generated from its scalar expression.
  // Every op of the table, so a new op's row is compile-checked here.
  int compiled = 0;
  for (int i = 0; i < kNumOps; ++i) {
    const OpId op = static_cast<OpId>(i);
    const ElementwiseKind kind = elementwise_kind(op);
    if (kind == ElementwiseKind::none || kind == ElementwiseKind::cast) continue;
    Trace t;
    TraceBuilder b(t);
    std::vector<Operand> ins;
    std::vector<const TensorType*> types;
    for (int k = 0; k < op_info(op).min_inputs; ++k) {
      const bool cond = kind == ElementwiseKind::select && k == 0;
      ins.push_back(Operand::of(
          b.add_arg(test::arg("x" + std::to_string(k), test::tt({3, 5}, cond ? DType::boolean : DType::f32))).name));
    }
    if (kind == ElementwiseKind::binary) ins.back() = Operand::lit(0.5);  // a literal stays inside
    b.emit1(op, ins);
    for (const Operand& o : t.bsyms[0].inputs) types.push_back(o.is_scalar() ? nullptr : &t.args.at(types.size()).type);
    const FlatStatement flat = flat_statement(t.bsyms[0], types);
    const Region r = describe_region(flat.fusion, flat.input_types);
    CHECK(r.shape == Shape{15});
    const CudaKernelSource src = cuda_source(r);
    INFO(op_name(op) << "\n" << src.source);
    for (int arch : {80, 90}) CHECK(nvrtc_cubin(src.source, src.name, arch).compare(0, 4, "\x7f" "ELF") == 0);
    ++compiled;
  }
  CHECK(compiled >= 20);
}

TEST_CASE("NVRTC: a compile error names the kernel and carries the log and source", "[fusion][nvrtc]") {
  CHECK_THROWS_WITH(nvrtc_cubin("extern \"C\" __global__ void k() { undeclared_name(); }", "broken_kernel", 80),
                    Catch::Contains("nvrtcCompileProgram") && Catch::Contains("broken_kernel") &&
                        Catch::Contains("undeclared_name") && Catch::Contains("compile log"));
}

// Run as a child by the case below: one region through the cache, then its counts.
TEST_CASE("NVRTC: child process of the disk cache case", "[.][nvrtc_disk_child]") {
  const Regions rs = regions_of("mlp", 4, 0);
  REQUIRE(!rs.unique.empty());
  cuda_binary(rs.unique.begin()->second, 80);
  const NvrtcStats st = nvrtc_stats();
  std::printf("compiled=%lld from_disk=%lld\n", static_cast<long long>(st.compiled),
              static_cast<long long>(st.from_disk));
}

TEST_CASE("NVRTC: with FSDPC_JIT_CACHE a second process compiles no region", "[fusion][nvrtc]") {
  namespace fs = std::filesystem;
  const fs::path dir = fsdpc::testing::scratch("nvrtc-cache");
  fs::remove_all(dir);
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const std::string cmd = "FSDPC_JIT_CACHE='" + dir.string() + "' '" + self + "' '[nvrtc_disk_child]'";
  CHECK_THAT(fsdpc::testing::run_shell(cmd).out, Catch::Contains("compiled=1 from_disk=0"));
  int cubins = 0;
  for (const auto& e : fs::directory_iterator(dir)) cubins += e.path().extension() == ".cubin";
  CHECK(cubins == 1);
  CHECK_THAT(fsdpc::testing::run_shell(cmd).out, Catch::Contains("compiled=1 from_disk=1"));
  // A key that is not this region's (another NVRTC, another generator) is a miss.
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".key") std::ofstream(e.path()) << "stale";
  CHECK_THAT(fsdpc::testing::run_shell(cmd).out, Catch::Contains("compiled=1 from_disk=0"));
  fs::remove_all(dir);
}

TEST_CASE("NVRTC: the region cache compiles a signature once per architecture", "[fusion][nvrtc]") {
  const Regions rs = regions_of("mlp", 4, 0);
  REQUIRE(!rs.unique.empty());
  const Region& r = rs.unique.begin()->second;
  const NvrtcStats before = nvrtc_stats();
  const CudaBinary& a = cuda_binary(r, 80);
  const CudaBinary& b = cuda_binary(r, 80);
  const CudaBinary& c = cuda_binary(r, 90);
  CHECK(&a == &b);
  CHECK(&a != &c);
  CHECK(!a.cubin.empty());
  CHECK(a.kernel == cuda_source(r).name);
  const NvrtcStats after = nvrtc_stats();
  CHECK(after.compiled - before.compiled == 2);
  CHECK(after.hits - before.hits == 1);
}

// Run by hand (`cuda_fusion_nvrtc_test "[print]"`): the generated source of
// every distinct gpt2-tiny region, to read.
TEST_CASE("NVRTC: print the generated CUDA of gpt2-tiny's regions", "[.][print]") {
  for (const auto& [sig, r] : regions_of("gpt2-tiny", 2, 16).unique)
    std::printf("// %s\n%s\n", sig.c_str(), cuda_source(r).source.c_str());
}
