// The CPU fusion executor against the float64 reference executor: every
// fusible elementwise op through a compiled region (to 1e-6 relative in f32),
// broadcasts, empty and size-1 dims, and random DAGs of fusible ops over
// random broadcast-compatible shapes. bf16 regions (autocast's converts
// fused with their neighbours) against f32 arithmetic on the host and
// executors/bf16.h's rounding, bit for bit: the store rounding on its edge
// values, bf16 loads, broadcasts of bf16 and a bias + gelu chain between
// bf16 buffers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <random>

#include "executors/claim.h"
#include "executors/cpu/cpu_executor.h"
#include "executors/fusion/fusion_kernel.h"
#include "executors/fusion/llvm_jit.h"
#include "executors/reference/reference.h"
#include "ir/builder.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/del.h"
#include "passes/fuse.h"
#include "runtime/interpreter.h"
#include "test/fusion_check.h"
#include "test/op_samples.h"
#include "test/scratch.h"

using namespace fsdpc;
using namespace fsdpc::test;

TEST_CASE("fusion: every fusible f32 op through a compiled region is within 1e-6 of the reference",
          "[fusion]") {
  std::mt19937 rng(11);
  const std::vector<OpId> unary = elementwise_ops(ElementwiseKind::unary);
  const std::vector<OpId> binary = elementwise_ops(ElementwiseKind::binary);
  const std::vector<OpId> compare = elementwise_ops(ElementwiseKind::compare);
  for (const Shape& shape : {Shape{37, 129}, Shape{300, 257}, Shape{1}, Shape{}, Shape{4, 0, 3}}) {
    auto check = [&](OpId op, int arity, bool literal) {
      Trace t;
      TraceBuilder b(t);
      std::vector<Operand> ins;
      for (int k = 0; k < arity; ++k) ins.push_back(Operand::of(b.add_arg(arg("x" + std::to_string(k), tt(shape))).name));
      if (literal) ins.back() = Operand::lit(op == OpId::Pow ? 1.5 : 0.75);
      const Proxy r = b.emit1(op, ins);
      // A second statement makes it a region; the op's own result is an
      // output too, so the region has two.
      const Proxy s = r.type.dtype == DType::boolean
                          ? b.emit1(OpId::ConvertElementType, {Operand::of(r.name)}, {{"dtype", std::string("f32")}})
                          : b.emit1(OpId::Neg, {Operand::of(r.name)});
      t.returns = ReturnTree::tuple({ReturnTree::leaf(r.name), ReturnTree::leaf(s.name)});
      INFO(op_name(op) << " on " << shape_str(shape) << (literal ? " with a literal" : ""));
      const Outcome o = fused_vs_reference(t, rng);
      CHECK(count_regions(o.fused) == 1);
      CHECK(o.worst < 1e-6);
    };
    for (OpId op : unary) check(op, 1, false);
    for (OpId op : binary) {
      check(op, 2, false);
      check(op, 2, true);
    }
    for (OpId op : compare) check(op, 2, false);
  }
}

TEST_CASE("fusion: where, bool casts and NaN-propagating maximum", "[fusion]") {
  std::mt19937 rng(12);
  Trace t;
  TraceBuilder b(t);
  const Shape shape{65, 33};
  const Proxy x = b.add_arg(arg("x", tt(shape)));
  const Proxy y = b.add_arg(arg("y", tt(shape)));
  const Proxy m = b.add_arg(arg("m", tt(shape, DType::boolean)));
  const Proxy c = b.emit1(OpId::Gt, {Operand::of(x.name), Operand::of(y.name)});
  const Proxy w = b.emit1(OpId::Where, {Operand::of(c.name), Operand::of(x.name), Operand::lit(-3.0)});
  const Proxy w2 = b.emit1(OpId::Where, {Operand::of(m.name), Operand::of(w.name), Operand::of(y.name)});
  const Proxy l = b.emit1(OpId::Log, {Operand::of(b.emit1(OpId::Sub, {Operand::of(x.name), Operand::lit(1.0)}).name)});
  const Proxy mx = b.emit1(OpId::Maximum, {Operand::of(l.name), Operand::of(w2.name)});  // NaN where x < 1
  const Proxy fb = b.emit1(OpId::ConvertElementType, {Operand::of(mx.name)}, {{"dtype", std::string("bool")}});
  t.returns = ReturnTree::tuple({ReturnTree::leaf(mx.name), ReturnTree::leaf(fb.name)});
  const Outcome o = fused_vs_reference(t, rng, 0.0, 2.0);
  CHECK(count_regions(o.fused) == 1);
  CHECK(o.worst < 1e-6);
}

TEST_CASE("fusion: broadcasts inside a region are indexed, not materialised", "[fusion]") {
  std::mt19937 rng(13);
  Trace t;
  TraceBuilder b(t);
  const Shape out{4, 3, 70};
  const Proxy x = b.add_arg(arg("x", tt(out)));
  const Proxy row = b.add_arg(arg("row", tt({70})));
  const Proxy col = b.add_arg(arg("col", tt({4, 1, 1})));
  const Proxy s = b.add_arg(arg("s", tt({})));
  auto bcast = [&](const Proxy& p, IntList dims) {
    return b.emit1(OpId::BroadcastInDim, {Operand::of(p.name)},
                   {{"shape", IntList(out.begin(), out.end())}, {"broadcast_dims", std::move(dims)}});
  };
  const Proxy rb = bcast(row, {2});
  const Proxy cb = bcast(col, {0, 1, 2});
  const Proxy sb = bcast(s, {});
  const Proxy a = b.emit1(OpId::Mul, {Operand::of(x.name), Operand::of(rb.name)});
  const Proxy a2 = b.emit1(OpId::Add, {Operand::of(a.name), Operand::of(cb.name)});
  const Proxy a3 = b.emit1(OpId::Div, {Operand::of(a2.name), Operand::of(sb.name)});
  t.returns = ReturnTree::tuple({ReturnTree::leaf(a3.name)});
  const Outcome o = fused_vs_reference(t, rng);
  REQUIRE(count_regions(o.fused) == 1);
  // Only the result is allocated: the broadcasts and a, a2 are intermediates.
  CHECK(o.fused.bsyms[0].outputs.size() == 1);
  CHECK(o.worst < 1e-6);
}

namespace {

// A random DAG of fusible ops over one output shape: arguments of that shape
// or broadcastable to it (size-1 and missing dims), values kept bounded so
// that f32 rounding stays comparable with the float64 reference.
Trace random_dag(std::mt19937& rng) {
  const std::vector<int64_t> sizes = {0, 1, 1, 2, 3, 5, 17, 40};
  Shape shape(rng() % 4);
  for (int64_t& d : shape) d = sizes[rng() % sizes.size()];
  Trace t;
  TraceBuilder b(t);
  std::vector<std::string> values;  // f32 values of `shape`
  const int n_args = 1 + static_cast<int>(rng() % 3);
  for (int k = 0; k < n_args; ++k) {
    Shape s;
    IntList dims;
    for (size_t d = 0; d < shape.size(); ++d) {
      const unsigned pick = rng() % 4;
      if (pick == 0) continue;  // dim dropped
      s.push_back(pick == 1 ? 1 : shape[d]);
      dims.push_back(static_cast<int64_t>(d));
    }
    const Proxy a = b.add_arg(arg("x" + std::to_string(k), tt(s)));
    values.push_back(s == shape ? a.name
                                : b.emit1(OpId::BroadcastInDim, {Operand::of(a.name)},
                                          {{"shape", IntList(shape.begin(), shape.end())}, {"broadcast_dims", dims}})
                                      .name);
  }
  auto any = [&] { return Operand::of(values[rng() % values.size()]); };
  const int n = 2 + static_cast<int>(rng() % 10);
  for (int i = 0; i < n; ++i) {
    Proxy p;
    switch (rng() % 9) {
      case 0: p = b.emit1(OpId::Add, {any(), any()}); break;
      case 1: p = b.emit1(OpId::Sub, {any(), Operand::lit(0.5)}); break;
      case 2: p = b.emit1(OpId::Mul, {any(), any()}); break;
      case 3: p = b.emit1(OpId::Maximum, {any(), any()}); break;
      case 4: p = b.emit1(OpId::Tanh, {any()}); break;
      case 5: p = b.emit1(OpId::Exp, {Operand::of(b.emit1(OpId::Tanh, {any()}).name)}); break;
      case 6: p = b.emit1(OpId::Sqrt, {Operand::of(b.emit1(OpId::Exp, {Operand::of(b.emit1(OpId::Tanh, {any()}).name)}).name)}); break;
      case 7: {
        const Proxy c = b.emit1(OpId::Lt, {any(), any()});
        p = b.emit1(OpId::Where, {Operand::of(c.name), any(), Operand::lit(0.25)});
        break;
      }
      default: p = b.emit1(OpId::Neg, {any()}); break;
    }
    values.push_back(p.name);
  }
  std::vector<ReturnTree> rets = {ReturnTree::leaf(values.back())};
  for (size_t i = static_cast<size_t>(n_args); i + 1 < values.size(); ++i)
    if (rng() % 4 == 0) rets.push_back(ReturnTree::leaf(values[i]));
  t.returns = ReturnTree::tuple(std::move(rets));
  return t;
}

}  // namespace

TEST_CASE("fusion: random DAGs of fusible ops over broadcast shapes match the reference", "[fusion]") {
  std::mt19937 rng(2024);
  int fused = 0;
  for (int trial = 0; trial < 150; ++trial) {
    const Trace t = random_dag(rng);
    INFO("trial " << trial << "\n" << print_trace(t));
    // Cancellation in sub and add may amplify the f32 rounding of an
    // intermediate, so the floor is the values' own scale (about 1).
    const Outcome o = fused_vs_reference(t, rng, -1.5, 1.5, 1.0);
    fused += count_regions(o.fused);
    CHECK(o.worst < 1e-5);
  }
  CHECK(fused > 100);
  const fusion::JitCacheStats s = fusion::jit_cache_stats();
  CHECK(s.compiled > 0);
}

TEST_CASE("fusion: the row loop is vectorised for the host, exp through libmvec", "[fusion]") {
  Trace t;
  TraceBuilder b(t);
  const Proxy x = b.add_arg(arg("x", tt({64, 1024})));
  const Proxy r = b.add_arg(arg("r", tt({1024})));
  const Proxy rb = b.emit1(OpId::BroadcastInDim, {Operand::of(r.name)},
                           {{"shape", IntList{64, 1024}}, {"broadcast_dims", IntList{1}}});
  const Proxy e = b.emit1(OpId::Exp, {Operand::of(b.emit1(OpId::Mul, {Operand::of(x.name), Operand::of(rb.name)}).name)});
  t.returns = ReturnTree::tuple({ReturnTree::leaf(e.name)});
  const Trace fused = fuse(claim(t, {&cpu_executor()}), Target::cpu);
  REQUIRE(count_regions(fused) == 1);
  fusion::LlvmJit jit;
  std::vector<TensorType> types;  // the region's inputs come in first-use order
  for (const Operand& in : fused.bsyms[0].inputs) types.push_back(in.name == x.name ? x.type : r.type);
  const fusion::Region region = fusion::describe_region(fused.bsyms[0], types);
  const std::string ir = jit.optimized_ir(region);
  INFO(ir);
  CHECK(ir.find("x float>") != std::string::npos);  // <8 x float> or <16 x float>
  CHECK(ir.find("_ZGV") != std::string::npos);      // a libmvec vector exp
}

TEST_CASE("fusion: a disk cache directory serves a region to a later JIT", "[fusion]") {
  const std::filesystem::path dir = fsdpc::testing::scratch("jit-cache");
  std::filesystem::remove_all(dir);
  Trace t;
  TraceBuilder b(t);
  const Proxy x = b.add_arg(arg("x", tt({3, 5})));
  const Proxy y = b.emit1(OpId::Tanh, {Operand::of(b.emit1(OpId::Mul, {Operand::of(x.name), Operand::lit(3.0)}).name)});
  t.returns = ReturnTree::tuple({ReturnTree::leaf(y.name)});
  const Trace fused = fuse(claim(t, {&cpu_executor()}), Target::cpu);
  REQUIRE(count_regions(fused) == 1);
  const fusion::Region region = fusion::describe_region(fused.bsyms[0], {x.type});
  std::vector<float> in(15), out1(15, 0), out2(15, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = 0.1f * static_cast<float>(i) - 0.7f;
  auto run = [&](fusion::RegionFn fn, std::vector<float>& out) {
    const void* ins[] = {in.data()};
    void* outs[] = {out.data()};
    fn(ins, outs, 0, 3);
  };
  {
    fusion::LlvmJit first(dir.string());
    run(first.compile(region), out1);
    CHECK(first.disk_hits() == 0);
  }
  fusion::LlvmJit second(dir.string());
  run(second.compile(region), out2);
  CHECK(second.disk_hits() == 1);
  CHECK(out1 == out2);
  for (size_t i = 0; i < in.size(); ++i) CHECK(out1[i] == Approx(std::tanh(3.0 * in[i])).epsilon(1e-6));
  std::filesystem::remove_all(dir);
}

// compile_all lowers and optimises regions on several threads at once (each
// its own LLVM context and target machine): the code must be what compile()
// makes one region at a time, equal regions compile once, and a region
// compiled already is not compiled again.
TEST_CASE("fusion: compile_all on 3 threads gives compile()'s code, each distinct region once", "[fusion]") {
  std::vector<fusion::Region> regions;
  std::vector<int64_t> cols;
  for (int64_t n : {5, 7, 5, 9, 11, 7}) {  // 5 and 7 twice: four distinct regions
    Trace t;
    TraceBuilder b(t);
    const Proxy x = b.add_arg(arg("x", tt({3, n})));
    const Proxy y = b.emit1(OpId::Tanh, {Operand::of(b.emit1(OpId::Mul, {Operand::of(x.name), Operand::lit(3.0)}).name)});
    const Proxy z = b.emit1(OpId::Exp, {Operand::of(y.name)});
    t.returns = ReturnTree::tuple({ReturnTree::leaf(z.name)});
    const Trace fused = fuse(claim(t, {&cpu_executor()}), Target::cpu);
    REQUIRE(count_regions(fused) == 1);
    regions.push_back(fusion::describe_region(fused.bsyms[0], {x.type}));
    cols.push_back(n);
  }
  fusion::LlvmJit one, many;
  const fusion::RegionFn first = many.compile(regions[3]);  // already compiled when compile_all runs
  const std::vector<fusion::RegionFn> fns = many.compile_all(regions, 3);
  REQUIRE(fns.size() == regions.size());
  CHECK(fns[3] == first);
  CHECK(fns[0] == fns[2]);
  CHECK(fns[1] == fns[5]);
  CHECK(fns[0] != fns[1]);
  for (size_t r = 0; r < regions.size(); ++r) {
    INFO("region " << r);
    const size_t n = static_cast<size_t>(3 * cols[r]);
    std::vector<float> in(n), want(n, 0), got(n, 0);
    for (size_t i = 0; i < n; ++i) in[i] = 0.05f * static_cast<float>(i) - 0.6f;
    const void* ins[] = {in.data()};
    void* out_want[] = {want.data()};
    void* out_got[] = {got.data()};
    one.compile(regions[r])(ins, out_want, 0, 3);
    fns[r](ins, out_got, 0, 3);
    CHECK(got == want);
    CHECK(got[n - 1] == Approx(std::exp(std::tanh(3.0 * in[n - 1]))).epsilon(1e-6));
  }
}

// Run by hand (`fusion_elementwise_test "[fusion_bench]"`): a gelu-like chain
// of eight elementwise ops over 4096 x 1024, fused vs the CPU executor's
// kernels one by one. For people: timings on a shared machine are noisy.
TEST_CASE("fusion: elementwise chain, fused vs unfused", "[.][fusion_bench]") {
  Trace t;
  TraceBuilder b(t);
  const Shape shape{4096, 1024};
  const Proxy x = b.add_arg(arg("x", tt(shape)));
  auto op = [&](OpId id, std::vector<Operand> in) { return Operand::of(b.emit1(id, std::move(in)).name); };
  const Operand x3 = op(OpId::Mul, {op(OpId::Mul, {Operand::of(x.name), Operand::of(x.name)}), Operand::of(x.name)});
  const Operand inner = op(OpId::Mul, {op(OpId::Add, {Operand::of(x.name), op(OpId::Mul, {x3, Operand::lit(0.044715)})}),
                                       Operand::lit(0.7978845608)});
  const Operand y = op(OpId::Mul, {op(OpId::Mul, {Operand::of(x.name), Operand::lit(0.5)}),
                                   op(OpId::Add, {op(OpId::Tanh, {inner}), Operand::lit(1.0)})});
  t.returns = ReturnTree::tuple({ReturnTree::leaf(y.name)});
  for (FusionMode mode : {FusionMode::none, FusionMode::automatic, FusionMode::none, FusionMode::automatic}) {
    const Trace exec = claim(t, {&cpu_executor()});
    const Trace run_trace = mode == FusionMode::automatic ? fuse(exec, Target::cpu) : insert_dels(exec);
    Allocator alloc;
    KernelContext ctx;
    Interpreter interp(alloc, {&cpu_executor()}, ctx);
    TensorValue in = write(alloc, x.type, std::vector<double>(static_cast<size_t>(numel(shape)), 0.3));
    interp.run(run_trace, {in});  // compiles
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 10; ++i) interp.run(run_trace, {in});
    const double ms = 1e2 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("fusion %s: %.2f ms per run (%d threads), peak %.1f MiB\n", std::string(fusion_mode_name(mode)).c_str(), ms, cpu_threads(),
                alloc.stats().total_peak / 1048576.0);
  }
}

TEST_CASE("fusion: the vectorised tanh is within 1e-6 of tanh from 1e-30 to overflow", "[fusion]") {
  Trace t;
  TraceBuilder b(t);
  std::vector<float> in;
  for (float m : {0.0f, 1e-30f, 1e-7f, 1e-3f, 0.1f, 0.6f, 0.625f, 0.65f, 1.0f, 3.0f, 9.0f, 20.0f, 50.0f, 100.0f})
    for (float s : {1.0f, -1.0f}) in.push_back(s * m);
  for (int i = 0; i <= 2000; ++i) in.push_back(-10.0f + 0.01f * static_cast<float>(i));
  const int64_t n = static_cast<int64_t>(in.size());
  const Proxy x = b.add_arg(arg("x", tt({n})));
  const Proxy y = b.emit1(OpId::Neg, {Operand::of(b.emit1(OpId::Tanh, {Operand::of(x.name)}).name)});
  t.returns = ReturnTree::tuple({ReturnTree::leaf(y.name)});
  const Trace fused = fuse(claim(t, {&cpu_executor()}), Target::cpu);
  REQUIRE(count_regions(fused) == 1);
  fusion::LlvmJit jit;
  const fusion::RegionFn fn = jit.compile(fusion::describe_region(fused.bsyms[0], {x.type}));
  std::vector<float> out(in.size());
  const void* ins[] = {in.data()};
  void* outs[] = {out.data()};
  fn(ins, outs, 0, 1);
  double worst = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const double want = -std::tanh(static_cast<double>(in[i]));
    INFO("tanh(" << in[i] << "): got " << -out[i] << ", want " << -want);
    if (want == 0) {
      CHECK(out[i] == 0);
      continue;
    }
    worst = std::max(worst, std::abs(out[i] - want) / std::abs(want));
  }
  CHECK(worst < 1e-6);
  std::printf("vectorised tanh: worst relative error %.2e\n", worst);
}

namespace {

Proxy convert(TraceBuilder& b, const Proxy& x, DType to) {
  return b.emit1(OpId::ConvertElementType, {Operand::of(x.name)}, Attrs{{"dtype", std::string(dtype_name(to))}});
}

// Random f32 bit patterns of every exponent (NaNs and infinities among them)
// after the edge values, so that odd row lengths see both in their tails.
std::vector<float> bf16_store_inputs(size_t n, std::mt19937& rng) {
  std::vector<float> v = bf16_edge_values();
  v.resize(std::min(v.size(), n));
  while (v.size() < n) v.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  return v;
}

// Values of a bf16 tensor: f32 values from [lo, hi] rounded to bf16.
std::vector<float> bf16_values(size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = round_to_bf16(u(rng));
  return v;
}

std::vector<float> f32_values(size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

}  // namespace

TEST_CASE("fusion: a bf16 store rounds as executors/bf16.h, bit for bit, NaN, inf and ties included",
          "[fusion][bf16]") {
  std::mt19937 rng(31);
  // Odd rows (vector tails), one element, and enough elements for threads.
  for (const Shape& shape : {Shape{3, 41}, Shape{1}, Shape{7, 1}, Shape{300, 257}, Shape{2, 0}}) {
    INFO("shape " << shape_str(shape));
    Trace t;
    TraceBuilder b(t);
    const Proxy x = b.add_arg(arg("x", tt(shape)));
    const Proxy n = b.emit1(OpId::Neg, {Operand::of(x.name)});
    const Proxy nb = convert(b, n, DType::bf16);
    const Proxy xb = convert(b, x, DType::bf16);
    t.returns = ReturnTree::tuple({ReturnTree::leaf(nb.name), ReturnTree::leaf(xb.name)});
    const Trace fused = fuse_bf16(t);
    INFO(print_trace(fused));
    REQUIRE(count_regions(fused) == 1);
    CHECK(fused.bsyms[0].outputs.size() == 2);  // neg's f32 result is not stored
    const std::vector<float> in = bf16_store_inputs(static_cast<size_t>(numel(shape)), rng);
    const std::vector<std::vector<float>> got = run_bits(fused, {in});
    REQUIRE(got.size() == 2);
    int mismatches = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      // -x by flipping the sign, as fneg does (also for NaN).
      const uint16_t want_n = f32_to_bf16(std::bit_cast<float>(bits(in[i]) ^ 0x80000000u));
      const uint16_t want_x = f32_to_bf16(in[i]);
      if (bits(got[0][i]) != static_cast<uint32_t>(want_n) << 16 || bits(got[1][i]) != static_cast<uint32_t>(want_x) << 16) {
        if (++mismatches <= 10)
          FAIL_CHECK("element " << i << ": x bits " << std::hex << bits(in[i]) << ": got " << bits(got[1][i])
                                << " / -x " << bits(got[0][i]) << ", want " << (static_cast<uint32_t>(want_x) << 16)
                                << " / " << (static_cast<uint32_t>(want_n) << 16));
      }
    }
    CHECK(mismatches == 0);
  }
  // The rule itself on its edges: ties to even, carries, NaN kept quiet.
  CHECK(f32_to_bf16(std::bit_cast<float>(0x3f808000u)) == 0x3f80);
  CHECK(f32_to_bf16(std::bit_cast<float>(0x3f818000u)) == 0x3f82);
  CHECK(f32_to_bf16(std::bit_cast<float>(0x7f7f8000u)) == 0x7f80);
  CHECK(f32_to_bf16(std::bit_cast<float>(0x7f800001u)) == 0x7fc0);
}

TEST_CASE("fusion: bf16 loads widen exactly, broadcasts of bf16 included, and feed f32 arithmetic",
          "[fusion][bf16]") {
  std::mt19937 rng(32);
  for (const Shape& shape : {Shape{5, 37}, Shape{300, 257}, Shape{9}, Shape{4, 0}}) {
    INFO("shape " << shape_str(shape));
    const int64_t cols = shape.back();
    Trace t;
    TraceBuilder b(t);
    const Proxy h = b.add_arg(arg("h", tt(shape, DType::bf16)));       // a bf16 matmul's output
    const Proxy y = b.add_arg(arg("y", tt(shape)));                    // an f32 value
    const Proxy c = b.add_arg(arg("c", tt({cols}, DType::bf16)));      // a bf16 row vector
    IntList last{static_cast<int64_t>(shape.size()) - 1};
    const Proxy cb = b.emit1(OpId::BroadcastInDim, {Operand::of(c.name)},
                             {{"shape", IntList(shape.begin(), shape.end())}, {"broadcast_dims", last}});
    const Proxy hf = convert(b, h, DType::f32);
    const Proxy cf = convert(b, cb, DType::f32);
    // (h + y) * c and max(h, c): no product feeds a sum, so no FMA can
    // contract it on either side, and f32 results are exact to compare.
    const Proxy s = b.emit1(OpId::Mul, {Operand::of(b.emit1(OpId::Add, {Operand::of(hf.name), Operand::of(y.name)}).name),
                                        Operand::of(cf.name)});
    const Proxy m = b.emit1(OpId::Maximum, {Operand::of(hf.name), Operand::of(cf.name)});
    const Proxy mb = convert(b, m, DType::bf16);  // exact: both are bf16 values
    const Proxy gt = b.emit1(OpId::Gt, {Operand::of(hf.name), Operand::of(y.name)});
    t.returns = ReturnTree::tuple({ReturnTree::leaf(s.name), ReturnTree::leaf(mb.name), ReturnTree::leaf(gt.name)});
    const Trace fused = fuse_bf16(t);
    INFO(print_trace(fused));
    REQUIRE(count_regions(fused) == 1);
    const size_t n = static_cast<size_t>(numel(shape));
    std::vector<float> hv = bf16_values(n, rng, -4, 4), yv = f32_values(n, rng, -4, 4),
                       cv = bf16_values(static_cast<size_t>(cols), rng, -2, 2);
    if (n > 3) {  // NaN and infinities load as themselves
      hv[0] = std::bit_cast<float>(0x7fc10000u);
      hv[1] = -INFINITY;
      hv[2] = INFINITY;
    }
    const std::vector<std::vector<float>> got = run_bits(fused, {hv, yv, cv});
    REQUIRE(got.size() == 3);
    int mismatches = 0;
    for (size_t i = 0; i < n; ++i) {
      const float ci = cv[i % static_cast<size_t>(cols)];
      const float want_s = (hv[i] + yv[i]) * ci;
      const float want_m = std::isnan(hv[i]) ? hv[i] : std::max(hv[i], ci);
      // A NaN's payload is whichever operand's the instruction keeps: NaN only.
      auto same = [](float g, float w) { return std::isnan(w) ? std::isnan(g) : bits(g) == bits(w); };
      const bool ok = same(got[0][i], want_s) && same(got[1][i], want_m) && got[2][i] == (hv[i] > yv[i] ? 1.0f : 0.0f);
      if (!ok && ++mismatches <= 10)
        FAIL_CHECK("element " << i << ": h " << hv[i] << " y " << yv[i] << " c " << ci << ": got " << got[0][i] << ", "
                              << got[1][i] << ", " << got[2][i] << "; want " << want_s << ", " << want_m);
    }
    CHECK(mismatches == 0);
  }
}

// Autocast's pattern after a bf16 matmul: back to f32, add the bias, gelu,
// and to bf16 for the next matmul: one region from bf16 to bf16, its f32
// values never stored. tanh and exp are not exact: each output must be the
// bf16 rounding of a value within 1e-6 of the float64 reference.
TEST_CASE("fusion: bf16 matmul output -> f32 bias + gelu -> bf16 is one region, rounded where stored",
          "[fusion][bf16]") {
  std::mt19937 rng(33);
  for (const Shape& shape : {Shape{16, 96}, Shape{3, 37}, Shape{130, 257}}) {
    INFO("shape " << shape_str(shape));
    const int64_t cols = shape.back();
    Trace t;
    TraceBuilder b(t);
    const Proxy h = b.add_arg(arg("h", tt(shape, DType::bf16)));
    const Proxy bias = b.add_arg(arg("bias", tt({cols})));
    const Proxy bb = b.emit1(OpId::BroadcastInDim, {Operand::of(bias.name)},
                             {{"shape", IntList(shape.begin(), shape.end())}, {"broadcast_dims", IntList{1}}});
    const Proxy a = b.emit1(OpId::Add, {Operand::of(convert(b, h, DType::f32).name), Operand::of(bb.name)});
    const Proxy g = b.emit1(OpId::Gelu, {Operand::of(a.name)}, {{"approximate", std::string("tanh")}});
    const Proxy gb = convert(b, g, DType::bf16);
    t.returns = ReturnTree::tuple({ReturnTree::leaf(gb.name)});
    const Trace fused = fuse_bf16(t);
    INFO(print_trace(fused));
    REQUIRE(count_regions(fused) == 1);
    REQUIRE(fused.bsyms[0].op == OpId::Fusion);
    CHECK(fused.bsyms[0].outputs.size() == 1);
    const size_t n = static_cast<size_t>(numel(shape));
    const std::vector<float> hv = bf16_values(n, rng, -3, 3), biasv = f32_values(static_cast<size_t>(cols), rng, -1, 1);
    const std::vector<std::vector<float>> got = run_bits(fused, {hv, biasv});
    int bad = 0;
    for (size_t i = 0; i < n; ++i) {
      const double x = static_cast<double>(hv[i] + biasv[i % static_cast<size_t>(cols)]);  // the f32 add, exact here
      const double want = 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
      // f32 gelu loses up to about 1e-6 of max(|gelu|, 1) where 1 + tanh cancels.
      if (!bf16_rounding_within(got[0][i], want, 1e-6, 1.0) && ++bad <= 10)
        FAIL_CHECK("element " << i << ": got " << got[0][i] << ", want bf16 of " << want);
    }
    CHECK(bad == 0);
  }
}

// What bf16 costs in a region: the region's loop still vectorises (i16
// loads and stores widened and rounded in vector integer ops), and a bf16
// region moving half the bytes is not slower than the f32 one.
TEST_CASE("fusion: a bf16 region's row loop is vectorised", "[fusion][bf16]") {
  Trace t;
  TraceBuilder b(t);
  const Proxy h = b.add_arg(arg("h", tt({64, 1024}, DType::bf16)));
  const Proxy y = b.emit1(OpId::Mul, {Operand::of(convert(b, h, DType::f32).name), Operand::lit(3.0)});
  const Proxy yb = convert(b, b.emit1(OpId::Add, {Operand::of(y.name), Operand::lit(1.0)}), DType::bf16);
  t.returns = ReturnTree::tuple({ReturnTree::leaf(yb.name)});
  const Trace fused = fuse_bf16(t);
  REQUIRE(count_regions(fused) == 1);
  fusion::LlvmJit jit;
  const fusion::Region region = fusion::describe_region(fused.bsyms[0], {h.type});
  const std::string ir = jit.optimized_ir(region);
  INFO(ir);
  CHECK(ir.find("x i16>") != std::string::npos);   // vector loads and stores of bf16 bits
  CHECK(ir.find("x float>") != std::string::npos);  // the f32 arithmetic
  CHECK(ir.find("bfloat") == std::string::npos);    // no LLVM bfloat (see llvm_lowering.cpp)
}

// Run by hand (`fusion_elementwise_test "[fusion_bench]"`): the bias + gelu
// region over 4096 x 1024 on one thread, loading and storing bf16 vs f32
// (f32: the same region with negations where the converts are), the
// compiled function alone. For people: timings on a shared machine are noisy.
TEST_CASE("fusion: bias + gelu region, bf16 vs f32 loads and stores", "[.][fusion_bench]") {
  const Shape shape{4096, 1024};
  const size_t n = 4096 * 1024;
  std::vector<float> in_f(n, 0.3f), out_f(n), bias(1024, 0.1f);
  std::vector<uint16_t> in_h(n, f32_to_bf16(0.3f)), out_h(n);
  fusion::LlvmJit jit;
  for (DType d : {DType::f32, DType::bf16, DType::f32, DType::bf16}) {
    Trace t;
    TraceBuilder b(t);
    const Proxy h = b.add_arg(arg("h", tt(shape, d)));
    const Proxy bs = b.add_arg(arg("bias", tt({1024})));
    // h is read first: the region's inputs are h, bias.
    const Proxy hf = d == DType::f32 ? b.emit1(OpId::Neg, {Operand::of(h.name)}) : convert(b, h, DType::f32);
    const Proxy bb = b.emit1(OpId::BroadcastInDim, {Operand::of(bs.name)},
                             {{"shape", IntList{4096, 1024}}, {"broadcast_dims", IntList{1}}});
    const Proxy g = b.emit1(OpId::Gelu, {Operand::of(b.emit1(OpId::Add, {Operand::of(hf.name), Operand::of(bb.name)}).name)},
                            {{"approximate", std::string("tanh")}});
    const Proxy out = d == DType::f32 ? b.emit1(OpId::Neg, {Operand::of(g.name)}) : convert(b, g, DType::bf16);
    t.returns = ReturnTree::tuple({ReturnTree::leaf(out.name)});
    const Trace fused = fuse_bf16(t);
    REQUIRE(count_regions(fused) == 1);
    REQUIRE(fused.bsyms[0].inputs[0].name == h.name);
    const fusion::RegionFn fn = jit.compile(fusion::describe_region(fused.bsyms[0], {h.type, bs.type}));
    const void* ins[] = {d == DType::f32 ? static_cast<const void*>(in_f.data()) : in_h.data(), bias.data()};
    void* outs[] = {d == DType::f32 ? static_cast<void*>(out_f.data()) : out_h.data()};
    fn(ins, outs, 0, 4096);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) fn(ins, outs, 0, 4096);
    const double ms = 50 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("bias + gelu [4096, 1024], %s in and out: %.2f ms per run (one thread)\n",
                std::string(dtype_name(d)).c_str(), ms);
  }
}
