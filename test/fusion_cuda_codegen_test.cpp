// The CUDA fusion executor's source generator (executors/fusion/
// cuda_codegen.h), host-only: built and run also without the CUDA toolkit.
// NVRTC compiles what it writes in cuda_fusion_nvrtc_test (with the
// toolkit) and gpu_fusion_test runs it (with a GPU); here, that every
// scalar expression translates and the kernel takes the shape the design
// says: block reductions for row values, a flat loop otherwise; bf16 loads
// and stores as 16-bit words with the host's rounding.
#include <catch2/catch.hpp>

#include <map>

#include "executors/claim.h"
#include "ir/builder.h"
#include "executors/fusion/cuda_codegen.h"
#include "executors/fusion/region.h"
#include "frontend/models/registry.h"
#include "passes/pipeline.h"
#include "passes/place.h"
#include "test/fusion_check.h"

using namespace fsdpc;
using namespace fsdpc::fusion;
using Catch::Contains;

namespace {

int arity(const ScalarExpr& e) {
  int n = e.prim == ScalarPrim::arg ? e.arg + 1 : 0;
  for (const ScalarExpr& c : e.children) n = std::max(n, arity(c));
  return n;
}

// One op's expression over [4, 8] loads, as a region of one statement.
Region one_op(OpId op, const ScalarExpr& e) {
  Region r;
  r.shape = {4, 8};
  Step s;
  s.op = op;
  s.expr = &e;
  s.dtype = is_comparison(e.prim) ? DType::boolean : DType::f32;
  for (int a = 0; a < arity(e); ++a) {
    const bool cond = op == OpId::Where && a == 0;
    r.loads.push_back(Load{a, cond ? DType::boolean : DType::f32, {8, 1}});
    s.args.push_back(StepArg{StepArg::Kind::load, a, 0});
  }
  r.steps.push_back(s);
  r.outputs = {0};
  return r;
}

}  // namespace

TEST_CASE("cuda codegen: every op with a scalar expression translates", "[fusion][cuda_codegen]") {
  int ops = 0;
  for (int i = 0; i < kNumOps; ++i) {
    const OpId op = static_cast<OpId>(i);
    const ScalarExpr* e = scalar_expr(op);
    if (!e) continue;
    INFO(op_name(op));
    const CudaKernelSource k = cuda_source(one_op(op, *e));
    CHECK(k.source.find("extern \"C\" __global__") != std::string::npos);
    CHECK(k.source.find("out0[i] = ") != std::string::npos);  // no row values: the flat loop
    CHECK(k.block == 256);
    CHECK(k.grid == 1);
    ++ops;
  }
  CHECK(ops >= 20);
}

TEST_CASE("cuda codegen: gpt2-tiny's regions, reductions as f64 block reductions", "[fusion][cuda_codegen]") {
  CaptureOptions co;
  co.batch = 2;
  co.seq = 16;
  PipelineOptions o;
  o.mesh = flat_mesh(2);
  // The head unfused: its cross-entropy's backward softmax is the row
  // reduction with an amax that the CPU fuses (attention's backward and
  // the fused head are kernels of their own).
  o.loss_chunk.fuse = false;
  const std::vector<Trace> traces = compile(place(capture(*make_model("gpt2-tiny"), co), Device{}), o).back().traces;
  std::map<std::string, std::string> source_of;  // by signature
  int sums = 0, amaxes = 0;
  for (const Trace& t : traces) {
    const Trace fused = execution_trace(t, Target::cpu, FusionMode::automatic);
    for (const auto& [bp, in] : test::loop_regions(fused)) {
      const BoundSymbol& b = *bp;
      const Region r = describe_region(b, in);
      const CudaKernelSource k = cuda_source(r);
      INFO(r.signature() << "\n" << k.source);
      // Equal signatures, equal code: what lets the cache key on the signature.
      auto [it, fresh] = source_of.emplace(r.signature(), k.source);
      CHECK(it->second == k.source);
      if (!fresh) continue;
      CHECK(k.block % 32 == 0);
      CHECK(k.inputs <= static_cast<int>(b.inputs.size()));
      bool row = false;
      for (const Step& s : r.steps) {
        row = row || s.row;
        sums += s.kind == StepKind::sum;
        amaxes += s.kind == StepKind::amax;
      }
      if (row) {
        CHECK(k.grid == std::min<int64_t>(r.rows(), 65536));
        CHECK_THAT(k.source, Contains("for (long long r = blockIdx.x;"));
      } else {
        CHECK_THAT(k.source, Contains("i += (long long)gridDim.x"));
      }
      for (const Step& s : r.steps) {
        if (s.kind == StepKind::sum) CHECK_THAT(k.source, Contains("double acc") && Contains("fsdpc_sum_op()"));
        if (s.kind == StepKind::amax) CHECK_THAT(k.source, Contains("fsdpc_max_op()"));
      }
    }
  }
  CHECK(sums > 0);   // layer_norm and softmax and their backward rules (cross-entropy's)
  CHECK(amaxes > 0);
}

TEST_CASE("cuda codegen: literals keep their value: NaN and infinities by bits, whole numbers as doubles",
          "[fusion][cuda_codegen]") {
  const ScalarExpr* where = scalar_expr(OpId::Where);
  REQUIRE(where);
  Region r = one_op(OpId::Where, *where);
  r.steps[0].args[2] = StepArg{StepArg::Kind::literal, 0, -INFINITY};
  CHECK_THAT(cuda_source(r).source, Contains("((float)__longlong_as_double(0xfff0000000000000ULL))"));
  r.steps[0].args[2] = StepArg{StepArg::Kind::literal, 0, 3};
  CHECK_THAT(cuda_source(r).source, Contains("((float)3.0)"));
}

// bf16 -> f32 * 3 -> bf16, and a row sum of the widened values: bf16 is
// `unsigned short` bits, widened on load, rounded by fsdpc_bf16_round (the
// host's rule, executors/bf16.h) where a step is bf16, stored as its upper
// half; the row sum stays f32.
TEST_CASE("cuda codegen: bf16 loads widen, bf16 steps round, stores keep the upper half", "[fusion][cuda_codegen][bf16]") {
  Trace t;
  TraceBuilder b(t);
  const Proxy h = b.add_arg(test::arg("h", test::tt({6, 40}, DType::bf16)));
  const Proxy hf = b.emit1(OpId::ConvertElementType, {Operand::of(h.name)}, Attrs{{"dtype", std::string("f32")}});
  const Proxy y = b.emit1(OpId::Mul, {Operand::of(hf.name), Operand::lit(3.0)});
  const Proxy yb = b.emit1(OpId::ConvertElementType, {Operand::of(y.name)}, Attrs{{"dtype", std::string("bf16")}});
  const Proxy s = b.emit1(OpId::Sum, {Operand::of(hf.name)}, {{"dims", IntList{1}}});
  t.returns = ReturnTree::tuple({ReturnTree::leaf(yb.name), ReturnTree::leaf(s.name)});
  const Trace fused = test::fuse_bf16(t);
  REQUIRE(test::count_regions(fused) == 1);
  const Region r = describe_region(fused.bsyms[0], {h.type});
  const CudaKernelSource k = cuda_source(r);
  INFO(k.source);
  CHECK_THAT(k.source, Contains("const unsigned short* __restrict__ in0"));
  CHECK_THAT(k.source, Contains("unsigned short* __restrict__ out0"));
  CHECK_THAT(k.source, Contains("float* __restrict__ out1"));
  CHECK_THAT(k.source, Contains("fsdpc_bf16_load(in0["));
  CHECK_THAT(k.source, Contains("= fsdpc_bf16_round("));
  CHECK_THAT(k.source, Contains("= fsdpc_bf16_bits("));
  CHECK_THAT(k.source, Contains("if (threadIdx.x == 0) out1[r] = (float)("));
  CHECK(k.source.find("#include") == std::string::npos);  // NVRTC needs no include path
}
