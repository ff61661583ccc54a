// Shared by the CPU executor's tests: a one-op trace run by the CPU kernels
// (a test-only trace runner, one buffer per proxy) against the float64
// reference executor, tolerances, and seeded random shapes and values.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "executors/bf16.h"
#include "executors/cpu/cpu_executor.h"
#include "executors/reference/reference.h"
#include "ir/builder.h"
#include "ir/printer.h"

namespace fsdpc::test {

using reference::Value;
using Data = std::vector<double>;

inline constexpr double kRtol = 1e-5;

inline TensorType tt(Shape shape, DType dtype = DType::f32) {
  TensorType t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  return t;
}

// Calls f(T{}) with the C++ type the CPU kernels hold dtype d in.
template <class F>
inline void with_ctype(DType d, F&& f) {
  switch (d) {
    case DType::f32: return f(float{});
    case DType::f64: return f(double{});
    case DType::i32: return f(int32_t{});
    case DType::i64: return f(int64_t{});
    case DType::i8: return f(int8_t{});
    case DType::boolean: return f(uint8_t{});
    default: FAIL("no C++ type for " << dtype_name(d));
  }
}

// A tensor as the runtime holds it: typed, contiguous, 8-byte aligned, and
// never a null pointer (even when empty, as an allocator would give).
struct Buffer {
  TensorType type;
  std::vector<uint64_t> words;
  explicit Buffer(TensorType t) : type(std::move(t)) {
    words.resize(std::max<int64_t>(1, (numel(type.shape) * dtype_size(type.dtype) + 7) / 8));
  }
  void* data() { return words.data(); }
};

inline Buffer to_buffer(const Value& v) {
  Buffer b(v.type);
  if (v.type.dtype == DType::bf16) {  // values a bf16 holds exactly are kept exactly
    auto* p = static_cast<uint16_t*>(b.data());
    for (size_t i = 0; i < v.data.size(); ++i) p[i] = f32_to_bf16(static_cast<float>(v.data[i]));
    return b;
  }
  with_ctype(v.type.dtype, [&](auto t) {
    using T = decltype(t);
    T* p = static_cast<T*>(b.data());
    for (size_t i = 0; i < v.data.size(); ++i) p[i] = static_cast<T>(v.data[i]);
  });
  return b;
}

inline Value to_value(Buffer& b) {
  Data d(numel(b.type.shape));
  if (b.type.dtype == DType::bf16) {
    const auto* p = static_cast<const uint16_t*>(b.data());
    for (size_t i = 0; i < d.size(); ++i) d[i] = bf16_to_f32(p[i]);
    return reference::make_value(b.type, std::move(d));
  }
  with_ctype(b.type.dtype, [&](auto t) {
    using T = decltype(t);
    const T* p = static_cast<const T*>(b.data());
    for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<double>(p[i]);
  });
  return reference::make_value(b.type, std::move(d));
}

// The test's trace runner: one buffer per proxy, each statement run by the
// CPU kernel when the CPU claims it whole, else through its decomposition.
// `decompose` runs every composite's decomposition (the prims path).
class CpuRunner {
 public:
  explicit CpuRunner(bool decompose = false) : decompose_(decompose) {}

  std::vector<Value> run(const Trace& t, const std::vector<Value>& args) {
    REQUIRE(args.size() == t.args.size());
    for (size_t i = 0; i < args.size(); ++i) env_.insert_or_assign(t.args[i].name, to_buffer(args[i]));
    run_bsyms(t.bsyms);
    std::vector<std::string> names;
    t.returns.collect_names(names);
    std::vector<Value> out;
    for (const std::string& n : names) out.push_back(to_value(env_.at(n)));
    return out;
  }

 private:
  void run_bsyms(const std::vector<BoundSymbol>& bsyms) {
    for (const BoundSymbol& b : bsyms) run_bsym(b);
  }

  void run_bsym(const BoundSymbol& b) {
    if (b.op == OpId::Del) {
      for (const Operand& o : b.inputs) env_.erase(o.name);
      return;
    }
    const Executor& cpu = cpu_executor();
    if (!cpu.claims(b) || (decompose_ && !b.subsymbols.empty())) {
      INFO("the CPU does not claim " << op_name(b.op) << " and it has no decomposition");
      REQUIRE_FALSE(b.subsymbols.empty());
      return run_bsyms(b.subsymbols);
    }
    std::vector<TensorView> in, out;
    for (const Proxy& p : b.outputs) env_.insert_or_assign(p.name, Buffer(p.type));
    for (const Operand& o : b.inputs) {
      if (o.is_scalar()) {
        in.push_back(TensorView{});
      } else {
        Buffer& buf = env_.at(o.name);
        in.push_back(TensorView{buf.data(), &buf.type});
      }
    }
    for (const Proxy& p : b.outputs) {
      Buffer& buf = env_.at(p.name);
      out.push_back(TensorView{buf.data(), &buf.type});
    }
    KernelContext ctx;
    cpu.kernel(b.op)(ctx, b, in, out);
  }

  bool decompose_;
  std::unordered_map<std::string, Buffer> env_;  // node-based: views stay valid
};

// Float outputs: |got - want| <= rtol * (|want| + floor * max(1, max |want|)).
// Elementwise ops are held to a pure relative error (a tiny floor); ops whose
// outputs cancel from larger terms (a matmul entry near zero, a layer_norm
// output where the shift meets the scaled value) to the precision of their
// terms, a tenth of the largest output. Integers and bools exactly.
inline void check_close(const Value& got, const Value& want, double rtol = kRtol, double floor = 1e-6) {
  REQUIRE(got.type.shape == want.type.shape);
  REQUIRE(got.type.dtype == want.type.dtype);
  const bool exact = !is_float(want.type.dtype);
  double scale = 1.0;
  for (double w : want.data)
    if (std::isfinite(w)) scale = std::max(scale, std::abs(w));
  double worst = 0.0;
  size_t worst_at = 0;
  for (size_t i = 0; i < want.data.size(); ++i) {
    const double g = got.data[i], w = want.data[i];
    if ((std::isnan(g) && std::isnan(w)) || g == w) continue;
    const double err = exact || !std::isfinite(w) ? INFINITY : std::abs(g - w) / (std::abs(w) + floor * scale);
    if (err > worst) worst = err, worst_at = i;
  }
  INFO("worst relative error " << worst << " at element " << worst_at << " of " << want.data.size()
                               << (want.data.empty() ? "" : ": got " + std::to_string(got.data[worst_at]) +
                                                               ", want " + std::to_string(want.data[worst_at])));
  CHECK(worst <= (exact ? 0.0 : rtol));
}

// An operand of a one-op test: a tensor with values, or a scalar literal.
struct Arg {
  TensorType type;
  Data data;
  std::optional<double> scalar;
};

inline Arg scalar(double v) { return Arg{{}, {}, v}; }

// The floor of check_close for ops whose outputs cancel from larger terms.
inline double cancelling_floor(OpId op) {
  switch (op) {
    case OpId::Matmul: case OpId::Linear: case OpId::ScaledDotProductAttention: case OpId::LayerNorm:
    case OpId::Gelu: case OpId::CrossEntropy: case OpId::IndexAdd:  // f32 sums of repeated rows
    case OpId::LinearCrossEntropy: case OpId::LinearCrossEntropyGrad: case OpId::ScaledDotProductAttentionGrad:
    case OpId::LinearCrossEntropyStats: case OpId::LinearCrossEntropyStatsGrad:
      return 0.1;
    default:
      return 1e-6;
  }
}

// The one-statement trace of `op` (a composite without its decomposition,
// so the direct kernel is what runs), and the values of its tensor args.
struct OneOp {
  Trace trace;
  std::vector<Value> values;
};
inline OneOp one_op(OpId op, const std::vector<Arg>& args, Attrs attrs = {}) {
  OneOp o;
  TraceBuilder b(o.trace, TraceBuilder::Options{false});
  std::vector<Operand> operands;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].scalar) {
      operands.push_back(Operand::lit(*args[i].scalar));
      continue;
    }
    const std::string name = "x" + std::to_string(i);
    b.add_arg(Proxy{name, args[i].type, "", true});
    operands.push_back(Operand::of(name));
    o.values.push_back(reference::make_value(args[i].type, args[i].data));
  }
  std::vector<ReturnTree> leaves;
  for (const Proxy& p : b.emit(op, operands, std::move(attrs))) leaves.push_back(ReturnTree::leaf(p.name));
  o.trace.returns = ReturnTree::tuple(std::move(leaves));
  return o;
}

// Runs the one-op trace on both executors and compares.
inline void check_op(OpId op, const std::vector<Arg>& args, Attrs attrs = {}, double rtol = kRtol) {
  const OneOp o = one_op(op, args, std::move(attrs));
  INFO(print_trace(o.trace));
  REQUIRE(cpu_executor().claims(o.trace.bsyms.back()));
  const std::vector<Value> want = reference::run(o.trace, o.values);
  const std::vector<Value> got = CpuRunner().run(o.trace, o.values);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) check_close(got[i], want[i], rtol, cancelling_floor(op));
}

// ---------------------------------------------------------------- random data

// Seeded 42, or FSDPC_TEST_SEED to shake out tolerance edges across many runs.
struct Rng {
  std::mt19937_64 gen{std::getenv("FSDPC_TEST_SEED") ? std::stoull(std::getenv("FSDPC_TEST_SEED")) : 42};

  int64_t uniform_int(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen); }
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(gen); }
  bool chance(double p) { return uniform(0.0, 1.0) < p; }

  // Mostly small dims; 1 and 0 often, and now and then a long one so the
  // vector loops and oneDNN's blocked paths see remainders.
  int64_t dim(bool allow_empty = true) {
    const double u = uniform(0.0, 1.0);
    if (allow_empty && u < 0.08) return 0;
    if (u < 0.25) return 1;
    if (u < 0.9) return uniform_int(2, 9);
    return uniform_int(10, 70);
  }
  Shape shape(int min_rank, int max_rank, bool allow_empty = true) {
    Shape s(uniform_int(min_rank, max_rank));
    for (int64_t& d : s) d = dim(allow_empty);
    return s;
  }
  // Values of dtype d: floats normal * stddev, integers in [-5, 5], bools.
  Data values(DType d, int64_t n, double stddev = 1.0) {
    Data v(n);
    std::normal_distribution<double> normal(0.0, stddev);
    for (double& x : v) {
      if (d == DType::boolean) x = static_cast<double>(chance(0.5));
      else if (is_integer(d)) x = static_cast<double>(uniform_int(-5, 5));
      else if (d == DType::bf16) x = round_to_bf16(static_cast<float>(normal(gen)));  // exact in bf16
      else x = static_cast<double>(static_cast<float>(normal(gen)));  // exact in f32
    }
    return v;
  }
  Arg tensor(Shape s, DType d = DType::f32, double stddev = 1.0) {
    const int64_t n = numel(s);
    return Arg{tt(std::move(s), d), values(d, n, stddev), std::nullopt};
  }
  Arg positive(Shape s, double lo = 0.05, double hi = 4.0) {
    Arg a = tensor(std::move(s));
    for (double& x : a.data) x = static_cast<float>(uniform(lo, hi));
    return a;
  }
  IntList subset(int64_t rank) {  // strictly increasing
    IntList dims;
    for (int64_t i = 0; i < rank; ++i)
      if (chance(0.5)) dims.push_back(i);
    return dims;
  }
};

inline constexpr int kShapes = 14;  // random shapes per op and variant

}  // namespace fsdpc::test
