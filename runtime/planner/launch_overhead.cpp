// The host time the CPU runtime spends on each statement beyond its work,
// measured for --hardware local: chains of statements on 8x8 tensors (whose
// work is a few nanoseconds) run through the real Interpreter and CPU
// executor, as the engine runs a step: looking up the kernel, allocating
// each output from the caching allocator, launching, freeing what del names.
// A small model pays it on each of its kernels (gpt2-tiny: about 130 a
// step, on tensors of kilobytes). Also the rate at which a fused region computes
// (a gelu, a softmax): regions of tanh and exp are bound by their
// arithmetic, not by the bytes they move.
#include <algorithm>

#include "executors/claim.h"
#include "executors/cpu/cpu_executor.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "passes/del.h"
#include "passes/fuse.h"
#include "runtime/interpreter.h"
#include "runtime/planner/planner.h"

namespace fsdpc {

namespace {

constexpr int64_t kSide = 8;     // 8x8 f32: the work is negligible, the launch is not
constexpr int kStatements = 200;  // per chain
constexpr int64_t kRegionSide = 128;  // the region probes' 16K elements

Proxy tensor_arg(const std::string& name) {
  Proxy p;
  p.name = name;
  p.type.shape = {kSide, kSide};
  return p;
}

// h = h @ w, kStatements times; with `elementwise`, each followed by
// h = h * 0.5 + 0.25 (two statements, one region when fused).
Trace chain(bool elementwise) {
  Trace t;
  TraceBuilder b(t);
  std::string h = b.add_arg(tensor_arg("h")).name;
  const std::string w = b.add_arg(tensor_arg("w")).name;
  for (int i = 0; i < kStatements; ++i) {
    h = b.emit1(OpId::Matmul, {Operand::of(h), Operand::of(w)}).name;
    if (!elementwise) continue;
    h = b.emit1(OpId::Mul, {Operand::of(h), Operand::lit(0.5)}).name;
    h = b.emit1(OpId::Add, {Operand::of(h), Operand::lit(0.25)}).name;
  }
  t.returns = ReturnTree::tuple({ReturnTree::leaf(h)});
  return t;
}

// Best seconds of one run of `t` (lowered for cpu with `fusion`) over
// repetitions filling about 0.1 s, after a warm-up run that JIT-compiles
// regions and fills the allocator's cache.
double run_seconds(const Trace& t, FusionMode fusion) {
  const Trace exec = execution_trace(t, Target::cpu, fusion);
  const Trace placed = fusion == FusionMode::automatic ? exec : insert_dels(exec);  // fuse places its own
  Allocator alloc;
  KernelContext ctx;
  Interpreter interp(alloc, {&cpu_executor()}, ctx);
  std::vector<TensorValue> args;
  for (const Proxy& a : placed.args) {
    args.push_back(allocate_tensor(alloc, a.type, MemCategory::activations));
    std::fill_n(static_cast<float*>(args.back().data()), numel(a.type.shape), 0.125f);
  }
  return best_seconds([&] { interp.run(placed, args); }, 0.1, 5, 200);
}

// y = 0.5 x (1 + tanh(0.79788 (x + 0.044715 x^3))) on 128x128: gelu, the
// largest region of a GPT-2 step, eight operations per element, one a tanh.
// 16K elements, a small model's tensor: regions that small run on one
// thread, larger ones on the rank's threads (about 1.8x faster at 2), so
// larger models' regions are priced high here by up to that, where their
// bytes do not dominate anyway.
Trace gelu_region(int& ops) {
  Trace t;
  TraceBuilder b(t);
  Proxy x = tensor_arg("x");
  x.type.shape = {kRegionSide, kRegionSide};
  const Operand in = Operand::of(b.add_arg(x).name);
  ops = 0;
  auto op = [&](OpId id, std::vector<Operand> args) {
    ++ops;
    return Operand::of(b.emit1(id, std::move(args)).name);
  };
  const Operand x3 = op(OpId::Mul, {op(OpId::Mul, {in, in}), in});
  const Operand inner = op(OpId::Mul, {op(OpId::Add, {in, op(OpId::Mul, {x3, Operand::lit(0.044715)})}),
                                       Operand::lit(0.7978845608)});
  const Operand y = op(OpId::Mul, {op(OpId::Mul, {in, Operand::lit(0.5)}),
                                   op(OpId::Add, {op(OpId::Tanh, {inner}), Operand::lit(1.0)})});
  t.returns = ReturnTree::tuple({ReturnTree::leaf(y.name)});
  return t;
}

// A softmax's region, as attention's: scale, amax, sub, exp, sum, div with
// the row broadcasts (8 ops), on 4 x 64 x 64 (16K elements, as above).
// Regions with row reductions compute far slower per element than
// elementwise ones.
Trace softmax_region(int& ops) {
  Trace t;
  TraceBuilder b(t);
  Proxy x = tensor_arg("x");
  x.type.shape = {4, 64, 64};
  const Operand in = Operand::of(b.add_arg(x).name);
  ops = 0;
  auto op = [&](OpId id, std::vector<Operand> args, Attrs attrs = {}) {
    ++ops;
    return Operand::of(b.emit1(id, std::move(args), std::move(attrs)).name);
  };
  const Attrs row{{"dims", IntList{2}}};
  const Attrs back{{"shape", IntList{4, 64, 64}}, {"broadcast_dims", IntList{0, 1}}};
  const Operand scaled = op(OpId::Mul, {in, Operand::lit(0.125)});
  const Operand e = op(OpId::Exp, {op(OpId::Sub, {scaled, op(OpId::BroadcastInDim, {op(OpId::Amax, {scaled}, row)}, back)})});
  const Operand y = op(OpId::Div, {e, op(OpId::BroadcastInDim, {op(OpId::Sum, {e}, row)}, back)});
  t.returns = ReturnTree::tuple({ReturnTree::leaf(y.name)});
  return t;
}

int count_op(const Trace& t, OpId op) {
  return static_cast<int>(std::count_if(t.bsyms.begin(), t.bsyms.end(), [&](const BoundSymbol& b) { return b.op == op; }));
}

}  // namespace

LaunchOverheads measure_launch_overheads() {
  const Trace matmuls = chain(false), mixed = chain(true);
  // The mixed chain must lower to what the differences below assume: one
  // region per matmul when fused, two plain statements when not.
  FSDPC_CHECK(count_op(execution_trace(mixed, Target::cpu, FusionMode::automatic), OpId::Fusion) == kStatements)
      << "advise: the overhead probe's regions did not fuse as expected";
  const double m = run_seconds(matmuls, FusionMode::none);
  const double fused = run_seconds(mixed, FusionMode::automatic), plain = run_seconds(mixed, FusionMode::none);
  LaunchOverheads o;
  o.matmul = m / kStatements;
  // A difference of two timings can come out at or below zero on a noisy
  // host; a launch is never free, so it is bounded below by a tenth of a
  // microsecond.
  o.region = std::max(1e-7, (fused - m) / kStatements);
  o.statement = std::max(1e-7, (plain - m) / (2.0 * kStatements));
  int ops = 0;
  const Trace gelu = gelu_region(ops);
  FSDPC_CHECK(count_op(execution_trace(gelu, Target::cpu, FusionMode::automatic), OpId::Fusion) == 1)
      << "advise: the elementwise probe did not fuse into one region";
  const double g = run_seconds(gelu, FusionMode::automatic);
  o.elementwise_rate = static_cast<double>(ops) * kRegionSide * kRegionSide / std::max(g - o.region, g / 2);
  const Trace softmax = softmax_region(ops);
  FSDPC_CHECK(count_op(execution_trace(softmax, Target::cpu, FusionMode::automatic), OpId::Fusion) == 1)
      << "advise: the row-reduction probe did not fuse into one region";
  const double r = run_seconds(softmax, FusionMode::automatic);
  o.row_region_rate = static_cast<double>(ops) * 4 * 64 * 64 / std::max(r - o.region, r / 2);
  return o;
}

}  // namespace fsdpc
