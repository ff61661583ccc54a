// Every CUDA kernel against the CPU executor on random shapes (empty and
// size-1 dims included), ggml's backend-comparison pattern: one-op traces
// run by the CPU interpreter and, placed on cuda:0, by the CUDA one. f32 to
// 1e-5 relative, integers and bools exactly; bf16 (device storage, f32
// arithmetic) to 1e-2 against the CPU's f32 run on the same bf16 values.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "executors/claim.h"
#include "executors/cpu/cpu_executor.h"
#include "executors/cuda/cuda_backend.h"
#include "executors/cuda/cuda_context.h"
#include "executors/cuda/cuda_executor.h"
#include "ir/builder.h"
#include "ir/printer.h"
#include "passes/place.h"
#include "runtime/interpreter.h"

using namespace fsdpc;
using Data = std::vector<double>;

namespace {

constexpr int kShapes = 12;  // random shapes per op and variant
const Device kGpu{DeviceKind::cuda, 0};
constexpr DType kAll[] = {DType::f32, DType::bf16, DType::f64, DType::i32, DType::i64, DType::boolean};

// bf16 as the device stores it: the high half of an f32, rounded to nearest even.
uint16_t bf16_bits(double v) {
  const auto f = static_cast<float>(v);
  if (std::isnan(f)) return 0x7fc0;
  const auto u = std::bit_cast<uint32_t>(f);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
double bf16_value(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }
double round_bf16(double v) { return bf16_value(bf16_bits(v)); }

// Calls f(T{}) with the host type of dtype d's bytes: bf16 as its bits, bool as one byte.
template <class F>
void with_bytes_type(DType d, F&& f) {
  switch (d) {
    case DType::f32: return f(float{});
    case DType::bf16: return f(uint16_t{});
    case DType::f64: return f(double{});
    case DType::i32: return f(int32_t{});
    case DType::i64: return f(int64_t{});
    case DType::boolean: return f(uint8_t{});
    default: FAIL("no host encoding for " << dtype_name(d));
  }
}

std::vector<std::byte> encode(DType d, const Data& values) {
  std::vector<std::byte> bytes(values.size() * static_cast<size_t>(dtype_size(d)));
  with_bytes_type(d, [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < values.size(); ++i) {
      const T v = d == DType::bf16 ? T(bf16_bits(values[i])) : d == DType::boolean ? T(values[i] != 0) : T(values[i]);
      std::memcpy(bytes.data() + i * sizeof(T), &v, sizeof(T));
    }
  });
  return bytes;
}

Data decode(DType d, const std::vector<std::byte>& bytes) {
  Data values(bytes.size() / static_cast<size_t>(dtype_size(d)));
  with_bytes_type(d, [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < values.size(); ++i) {
      T v;
      std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
      values[i] = d == DType::bf16 ? bf16_value(static_cast<uint16_t>(v)) : static_cast<double>(v);
    }
  });
  return values;
}

// An operand of a one-op case (a tensor with values, or a scalar literal),
// or an output read back to the host.
struct Arg {
  TensorType type;
  Data data;
  std::optional<double> scalar;
};
Arg lit(double v) { return Arg{{}, {}, v}; }

// The same case with its f32 tensors stored as bf16 (values rounded).
std::vector<Arg> as_bf16(std::vector<Arg> args) {
  for (Arg& a : args)
    if (!a.scalar && a.type.dtype == DType::f32) {
      a.type.dtype = DType::bf16;
      std::transform(a.data.begin(), a.data.end(), a.data.begin(), round_bf16);
    }
  return args;
}

// The one-statement trace of `op` on `device`, composites without their
// decomposition, so the kernels under test are what runs.
Trace one_op_trace(OpId op, const std::vector<Arg>& args, Attrs attrs, const Device& device) {
  Trace t;
  TraceBuilder b(t, TraceBuilder::Options{false});
  std::vector<Operand> operands;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].scalar) {
      operands.push_back(Operand::lit(*args[i].scalar));
      continue;
    }
    Proxy p{"x" + std::to_string(i), args[i].type, "", true};
    p.type.device = device;
    operands.push_back(Operand::of(b.add_arg(p).name));
  }
  if (attrs.has("device")) attrs.set("device", device_name(device));
  std::vector<ReturnTree> leaves;
  for (const Proxy& p : b.emit(op, std::move(operands), std::move(attrs))) leaves.push_back(ReturnTree::leaf(p.name));
  t.returns = ReturnTree::tuple(std::move(leaves));
  return t;
}

bool is_one_of(OpId op, std::initializer_list<OpId> ops) { return std::find(ops.begin(), ops.end(), op) != ops.end(); }

// Ops whose float outputs cancel from larger terms: held to the precision of
// their terms, a tenth of the largest output (the floors of cpu_executor_test).
double cancelling_floor(OpId op) {
  return is_one_of(op, {OpId::Matmul, OpId::Linear, OpId::ScaledDotProductAttention, OpId::LayerNorm, OpId::Gelu,
                        OpId::CrossEntropy, OpId::IndexAdd}) ? 0.1 : 1e-6;
}

// Ops that move, select, negate or convert values: their bf16 outputs are exact.
bool exact_in_bf16(OpId op) {
  return is_one_of(op, {OpId::ConvertElementType, OpId::Full, OpId::Iota, OpId::Where, OpId::Permute,
                        OpId::BroadcastInDim, OpId::Slice, OpId::Pad, OpId::Cat, OpId::Take, OpId::Pack,
                        OpId::Unpack, OpId::Neg, OpId::Maximum, OpId::Amax});
}

// |got - want| <= rtol * (|want| + floor * max(1, max |want|)); NaN matches
// NaN and infinities match exactly; integers and bools exactly.
void check_close(const Data& got, const Data& want, bool exact, double rtol, double floor) {
  REQUIRE(got.size() == want.size());
  double scale = 1.0;
  for (double w : want)
    if (std::isfinite(w)) scale = std::max(scale, std::abs(w));
  double worst = 0.0;
  size_t at = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got[i], w = want[i];
    if (g == w || (std::isnan(g) && std::isnan(w))) continue;
    const double err = exact || !std::isfinite(w) ? INFINITY : std::abs(g - w) / (std::abs(w) + floor * scale);
    if (err > worst) worst = err, at = i;
  }
  INFO("worst relative error " << worst << " at element " << at << " of " << want.size()
                               << (want.empty() ? "" : ": got " + std::to_string(got[at]) + ", want " +
                                                          std::to_string(want[at])));
  CHECK(worst <= (exact ? 0.0 : rtol));
}

// Seeded 42, or FSDPC_TEST_SEED to shake out tolerance edges.
struct Rng {
  std::mt19937_64 gen{std::getenv("FSDPC_TEST_SEED") ? std::stoull(std::getenv("FSDPC_TEST_SEED")) : 42};

  int64_t uniform_int(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen); }
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(gen); }
  // Small dims, 0 and 1 often, now and then a long one for the tails.
  int64_t dim(bool allow_empty = true) {
    const double u = uniform(0.0, 1.0);
    if (allow_empty && u < 0.08) return 0;
    return u < 0.25 ? 1 : u < 0.9 ? uniform_int(2, 9) : uniform_int(10, 70);
  }
  Shape shape(int min_rank, int max_rank, bool allow_empty = true) {
    Shape s(static_cast<size_t>(uniform_int(min_rank, max_rank)));
    for (int64_t& d : s) d = dim(allow_empty);
    return s;
  }
  // Floats normal(0, stddev), exact in the dtype; integers in [-5, 5]; bools.
  Arg tensor(Shape s, DType d = DType::f32, double stddev = 1.0) {
    Arg a;
    a.type.dtype = d;
    a.data.resize(static_cast<size_t>(numel(s)));
    a.type.shape = std::move(s);
    std::normal_distribution<double> normal(0.0, stddev);
    for (double& x : a.data)
      x = d == DType::boolean ? double(uniform_int(0, 1))
          : is_integer(d)     ? double(uniform_int(-5, 5))
          : d == DType::bf16  ? round_bf16(normal(gen))
                              : double(static_cast<float>(normal(gen)));
    return a;
  }
  Arg uniform_tensor(Shape s, double lo, double hi) {
    Arg a = tensor(std::move(s));
    for (double& x : a.data) x = static_cast<float>(uniform(lo, hi));
    return a;
  }
  Arg indices(Shape s, DType d, int64_t bound) {  // in [0, bound), repeats happen
    Arg a = tensor(std::move(s), d);
    for (double& x : a.data) x = static_cast<double>(uniform_int(0, bound - 1));
    return a;
  }
};

// Both sides of every comparison, one per TEST_CASE so the device's context,
// backend and allocator are gone before main returns.
struct Harness {
  cuda::CudaContext ctx;
  std::unique_ptr<DeviceBackend> backend = cuda::make_cuda_backend(ctx);
  Allocator gpu_alloc{*backend};
  Allocator cpu_alloc{cpu_backend()};
  KernelContext cpu_context;
  Rng r;

  // Claims `t` for one executor alone (every statement must be its), runs it
  // on host values uploaded to the executor's device and reads the outputs back.
  std::vector<Arg> run(const Trace& t, const std::vector<Data>& inputs, bool gpu) {
    const Executor& executor = gpu ? cuda_executor() : cpu_executor();
    Allocator& alloc = gpu ? gpu_alloc : cpu_alloc;
    const Trace exec = claim(t, {&executor});
    INFO(print_trace(exec));
    for (const BoundSymbol& b : exec.bsyms) REQUIRE(b.executor == executor.name());
    std::vector<TensorValue> args;
    for (size_t i = 0; i < t.args.size(); ++i) {
      args.push_back(allocate_tensor(alloc, t.args[i].type, MemCategory::activations));
      const std::vector<std::byte> bytes = encode(t.args[i].type.dtype, inputs[i]);
      alloc.backend().copy_from_host(args.back().data(), bytes.data(), bytes.size());
    }
    const std::vector<TensorValue> outs =
        Interpreter(alloc, {&executor}, gpu ? static_cast<KernelContext&>(ctx) : cpu_context).run(exec, args);
    if (gpu) ctx.synchronize();
    std::vector<Arg> results;
    for (const TensorValue& v : outs) {
      std::vector<std::byte> bytes(static_cast<size_t>(numel(v.type.shape) * dtype_size(v.type.dtype)));
      alloc.backend().copy_to_host(bytes.data(), v.data(), bytes.size());
      results.push_back(Arg{v.type, decode(v.type.dtype, bytes), std::nullopt});
    }
    return results;
  }

  // Runs `op` on both sides and compares. bf16 tensors (and dtype=bf16)
  // are f32 on the CPU, and the GPU trace is then built on cuda:0 as it is;
  // an all-f32 case's GPU trace is the CPU trace placed on cuda:0.
  void check(OpId op, const std::vector<Arg>& args, const Attrs& attrs = {}) {
    std::vector<Arg> cpu_args = args;
    Attrs cpu_attrs = attrs;
    bool bf16 = attrs.has("dtype") && attrs.get_str("dtype") == "bf16";
    if (bf16) cpu_attrs.set("dtype", std::string("f32"));
    std::vector<Data> inputs;
    for (Arg& a : cpu_args) {
      if (a.scalar) continue;
      inputs.push_back(a.data);
      if (a.type.dtype == DType::bf16) a.type.dtype = DType::f32, bf16 = true;
    }
    const Trace cpu_trace = one_op_trace(op, cpu_args, cpu_attrs, Device{});
    const Trace gpu_trace = bf16 ? one_op_trace(op, args, attrs, kGpu) : place(cpu_trace, kGpu);
    INFO(print_trace(gpu_trace));
    const std::vector<Arg> want = run(cpu_trace, inputs, false);
    const std::vector<Arg> got = run(gpu_trace, inputs, true);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      REQUIRE(got[i].type.shape == want[i].type.shape);
      REQUIRE(got[i].type.device == kGpu);
      Data w = want[i].data;
      double rtol = 1e-5;
      if (got[i].type.dtype != DType::bf16)
        REQUIRE(got[i].type.dtype == want[i].type.dtype);
      else if (exact_in_bf16(op))
        std::transform(w.begin(), w.end(), w.begin(), round_bf16);
      else
        rtol = 1e-2;
      check_close(got[i].data, w, !is_float(got[i].type.dtype), rtol, cancelling_floor(op));
    }
  }
  // Float ops: in f32, then with every f32 tensor stored as bf16.
  void check_f32_bf16(OpId op, const std::vector<Arg>& args, const Attrs& attrs = {}) {
    check(op, args, attrs);
    check(op, as_bf16(args), attrs);
  }
};

Attrs dtype_attr(DType d) { return Attrs{{"dtype", std::string(dtype_name(d))}}; }

}  // namespace

TEST_CASE("gpu kernels: unary ops, and convert_element_type between every dtype", "[gpu][kernels]") {
  Harness h;
  for (OpId op : {OpId::Neg, OpId::Exp, OpId::Log, OpId::Tanh, OpId::Sqrt, OpId::Rsqrt})
    for (int i = 0; i < kShapes; ++i) {
      const Shape s = i == 0 ? Shape{1000} : i == 1 ? Shape{3, 70001} : h.r.shape(0, 4);
      const bool positive = op == OpId::Log || op == OpId::Sqrt || op == OpId::Rsqrt;
      h.check_f32_bf16(op, {positive ? h.r.uniform_tensor(s, 0.05, 4.0) : h.r.tensor(s, DType::f32, 3.0)});
    }
  for (DType d : {DType::i32, DType::i64})
    for (int i = 0; i < 4; ++i) h.check(OpId::Neg, {h.r.tensor(i == 0 ? Shape{1001} : h.r.shape(0, 3), d)});
  for (DType from : kAll)
    for (DType to : kAll)
      for (int i = 0; i < 3; ++i) {
        Arg x = h.r.tensor(i == 0 ? Shape{1003} : h.r.shape(0, 3), from, 4.0);
        if (!x.data.empty()) x.data[0] = is_float(from) ? -2.75 : 0.0;  // truncation toward zero
        h.check(OpId::ConvertElementType, {x}, dtype_attr(to));
      }
}

TEST_CASE("gpu kernels: binary arithmetic with tensors and scalar literals, NaN winning maximum", "[gpu][kernels]") {
  Harness h;
  for (OpId op : {OpId::Add, OpId::Sub, OpId::Mul, OpId::Div, OpId::Maximum, OpId::Pow})
    for (int i = 0; i < kShapes; ++i) {
      const Shape s = i == 0 ? Shape{4099} : h.r.shape(0, 4);
      auto operand = [&] { return op == OpId::Pow ? h.r.uniform_tensor(s, 0.5, 2.0) : h.r.tensor(s); };
      const double c = op == OpId::Pow ? std::array{2.0, 3.0, 0.5, -1.5, 1.0}[i % 5] : 1.75;
      Arg b = operand();
      if (op == OpId::Div) std::replace(b.data.begin(), b.data.end(), 0.0, 1.0);
      h.check_f32_bf16(op, {operand(), b});
      h.check_f32_bf16(op, {operand(), lit(c)});
      if (op != OpId::Pow) h.check_f32_bf16(op, {lit(c), b});
    }
  for (DType d : {DType::i32, DType::i64})
    for (OpId op : {OpId::Add, OpId::Sub, OpId::Mul, OpId::Maximum})
      for (const Shape& s : {Shape{2051}, h.r.shape(0, 3), h.r.shape(0, 3)}) {
        h.check(op, {h.r.tensor(s, d), h.r.tensor(s, d)});
        h.check(op, {h.r.tensor(s, d), lit(3.0)});
        h.check(op, {lit(-2.0), h.r.tensor(s, d)});
      }
  const double nan = std::nan("");
  Arg a = h.r.tensor({1001}), b = h.r.tensor({1001});  // NaNs in the vector steps and the tail
  for (size_t i = 0; i < 1001; i += 7) (i % 2 ? a : b).data[i] = nan;
  a.data[1000] = b.data[1000] = nan;
  h.check_f32_bf16(OpId::Maximum, {a, b});
  h.check_f32_bf16(OpId::Maximum, {a, lit(0.5)});
}

TEST_CASE("gpu kernels: comparisons and where over every dtype", "[gpu][kernels]") {
  Harness h;
  for (OpId op : {OpId::Eq, OpId::Ne, OpId::Lt, OpId::Le, OpId::Gt, OpId::Ge})
    for (DType d : kAll)
      for (int i = 0; i < 3 && (d != DType::boolean || op == OpId::Eq || op == OpId::Ne); ++i) {  // bool: eq, ne
        const Shape s = i == 0 ? Shape{1030} : h.r.shape(0, 3);
        Arg a = h.r.tensor(s, d, 2.0), b = h.r.tensor(s, d, 2.0);
        for (Arg* x : {&a, &b})
          for (double& v : x->data) v = std::round(v);  // equal pairs happen
        h.check(op, {a, b});
        h.check(op, {a, lit(d == DType::boolean ? 1.0 : 0.0)});
        h.check(op, {lit(1.0), b});
      }
  for (DType d : kAll)
    for (int i = 0; i < 4; ++i) {
      const Shape s = i == 0 ? Shape{2053} : h.r.shape(0, 4);
      const Arg cond = h.r.tensor(s, DType::boolean), a = h.r.tensor(s, d), b = h.r.tensor(s, d);
      h.check(OpId::Where, {cond, a, b});
      h.check(OpId::Where, {cond, a, lit(0.0)});
      h.check(OpId::Where, {cond, lit(1.0), b});
    }
}

TEST_CASE("gpu kernels: sum and amax over any dims", "[gpu][kernels]") {
  Harness h;
  std::vector<std::pair<Shape, IntList>> cases{
      {{3, 5000}, {1}}, {{5000, 3}, {0}}, {{64, 33, 40}, {0, 2}}, {{2, 100003}, {0, 1}}, {{300, 1024}, {1}}};
  for (int i = 0; i < 3 * kShapes; ++i) {
    cases.emplace_back(h.r.shape(0, 4), IntList{});
    for (size_t k = 0; k < cases.back().first.size(); ++k)
      if (h.r.uniform_int(0, 1)) cases.back().second.push_back(static_cast<int64_t>(k));  // any subset
  }
  for (OpId op : {OpId::Sum, OpId::Amax})
    for (const auto& [s, dims] : cases) h.check_f32_bf16(op, {h.r.tensor(s, DType::f32, 2.0)}, Attrs{{"dims", dims}});
  Arg x = h.r.tensor({2, 3});
  x.data = {1.0, std::nan(""), 0.0, 2.0, 3.0, -1.0};
  h.check_f32_bf16(OpId::Amax, {x}, Attrs{{"dims", IntList{1}}});
}

TEST_CASE("gpu kernels: permute, broadcast_in_dim, slice with strides, pad with interior, cat", "[gpu][kernels]") {
  Harness h;
  for (int i = 0; i < 2 * kShapes; ++i) {
    const DType d = std::array{DType::f32, DType::i64, DType::bf16, DType::boolean, DType::i32}[i % 5];
    const Shape s = h.r.shape(0, 4);
    IntList perm(s.size()), all(s.size() + static_cast<size_t>(h.r.uniform_int(0, 2))), bd;
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), h.r.gen);
    h.check(OpId::Permute, {h.r.tensor(s, d)}, Attrs{{"dims", perm}});
    std::iota(all.begin(), all.end(), 0);
    std::sample(all.begin(), all.end(), std::back_inserter(bd), s.size(), h.r.gen);
    IntList out(all.size());
    for (int64_t& o : out) o = h.r.dim();
    for (size_t k = 0; k < s.size(); ++k)
      if (s[k] != 1) out[static_cast<size_t>(bd[k])] = s[k];
    h.check(OpId::BroadcastInDim, {h.r.tensor(s, d)}, Attrs{{"shape", out}, {"broadcast_dims", bd}});

    const Shape t = i < 2 ? Shape{i == 0 ? 1000 : 37, 70} : h.r.shape(1, 4);
    IntList starts, ends, steps, lo, hi, interior;
    for (int64_t e : t) {
      starts.push_back(h.r.uniform_int(0, e));
      ends.push_back(h.r.uniform_int(starts.back(), e));
      steps.push_back(h.r.uniform_int(1, 3));
      lo.push_back(h.r.uniform_int(0, 2));
      hi.push_back(h.r.uniform_int(0, 2));
      interior.push_back(h.r.uniform_int(0, 2));
    }
    h.check(OpId::Slice, {h.r.tensor(t, d)}, Attrs{{"starts", starts}, {"ends", ends}, {"strides", steps}});
    Attrs pad{{"lo", lo}, {"hi", hi}, {"value", d == DType::boolean ? 1.0 : -0.5}};
    h.check(OpId::Pad, {h.r.tensor(t, d)}, pad);
    h.check(OpId::Pad, {h.r.tensor(t, d)}, pad.set("interior", interior));
    const int64_t dim = h.r.uniform_int(0, static_cast<int64_t>(t.size()) - 1);
    std::vector<Arg> parts;
    for (int64_t k = h.r.uniform_int(1, 4); k > 0; --k) {
      Shape p = t;
      p[static_cast<size_t>(dim)] = h.r.dim();
      parts.push_back(h.r.tensor(p, d));
    }
    h.check(OpId::Cat, parts, Attrs{{"dim", dim}});
  }
  h.check(OpId::Permute, {h.r.tensor({67, 45})}, Attrs{{"dims", IntList{1, 0}}});
  h.check(OpId::Permute, {h.r.tensor({512, 768})}, Attrs{{"dims", IntList{1, 0}}});
  h.check(OpId::Permute, {h.r.tensor({4, 256, 12, 64}, DType::bf16)}, Attrs{{"dims", IntList{0, 2, 1, 3}}});
  h.check(OpId::BroadcastInDim, {h.r.tensor({768})},
          Attrs{{"shape", IntList{512, 768}}, {"broadcast_dims", IntList{1}}});
  h.check(OpId::BroadcastInDim, {h.r.tensor({300, 1})},
          Attrs{{"shape", IntList{300, 1001}}, {"broadcast_dims", IntList{0, 1}}});
}

TEST_CASE("gpu kernels: take and index_add with i32 and i64 indices", "[gpu][kernels]") {
  Harness h;
  for (int i = 0; i < 2 * kShapes; ++i) {
    const DType idx = i % 2 ? DType::i32 : DType::i64;
    const DType d = std::array{DType::i64, DType::f32, DType::bf16}[i % 3];
    Shape s = h.r.shape(1, 3);
    const int64_t dim = h.r.uniform_int(0, static_cast<int64_t>(s.size()) - 1);
    int64_t& rows = s[static_cast<size_t>(dim)];
    rows = std::max<int64_t>(rows, 1);
    h.check(OpId::Take, {h.r.tensor(s, d), h.r.indices(h.r.shape(0, 2), idx, rows)}, Attrs{{"dim", dim}});
    if (d == DType::bf16) continue;  // index_add in f32 and integers: bf16 sums round at every add
    const Arg at = h.r.indices({h.r.dim()}, idx, rows);
    Shape src = s;
    src[static_cast<size_t>(dim)] = at.type.shape[0];
    h.check(OpId::IndexAdd, {h.r.tensor(s, d), at, h.r.tensor(src, d)}, Attrs{{"dim", dim}});
  }
  const Attrs dim0{{"dim", int64_t{0}}};
  for (DType idx : {DType::i32, DType::i64}) {  // an embedding table and its gradient
    h.check(OpId::Take, {h.r.tensor({1000, 768}), h.r.indices({4, 128}, idx, 1000)}, dim0);
    h.check(OpId::Take, {h.r.tensor({1000, 768}, DType::bf16), h.r.indices({4, 128}, idx, 1000)}, dim0);
    h.check(OpId::IndexAdd, {h.r.tensor({1000, 768}), h.r.indices({512}, idx, 1000), h.r.tensor({512, 768})}, dim0);
    h.check(OpId::IndexAdd, {h.r.tensor({300, 5}, DType::i64), h.r.indices({700}, idx, 5),
                             h.r.tensor({300, 700}, DType::i64)}, Attrs{{"dim", int64_t{1}}});
  }
}

TEST_CASE("gpu kernels: matmul (2-D, batched, shared 2-D right operand) and linear", "[gpu][kernels]") {
  Harness h;
  for (int i = 0; i < 2 * kShapes; ++i) {
    const int64_t m = h.r.dim(), k = i % 7 == 0 ? 0 : h.r.dim(), n = h.r.dim();
    Shape a = h.r.shape(0, 2), b = a;
    a.insert(a.end(), {m, k});
    b.insert(b.end(), {k, n});
    h.check_f32_bf16(OpId::Matmul, {h.r.tensor(a), h.r.tensor(b)});
    h.check_f32_bf16(OpId::Matmul, {h.r.tensor(a), h.r.tensor({k, n})});
    h.check_f32_bf16(OpId::Linear, {h.r.tensor(a), h.r.tensor({n, k})});
    h.check_f32_bf16(OpId::Linear, {h.r.tensor(a), h.r.tensor({n, k}), h.r.tensor({n})});
  }
  h.check_f32_bf16(OpId::Matmul, {h.r.tensor({2, 65, 130}), h.r.tensor({130, 97})});
  h.check_f32_bf16(OpId::Matmul, {h.r.tensor({2, 520, 24}), h.r.tensor({2, 24, 17})});
  h.check_f32_bf16(OpId::Matmul, {h.r.tensor({512, 768}), h.r.tensor({768, 768})});
  h.check_f32_bf16(OpId::Linear, {h.r.tensor({3, 50, 96}), h.r.tensor({130, 96}), h.r.tensor({130})});
  h.check_f32_bf16(OpId::Linear, {h.r.tensor({2, 128, 768}), h.r.tensor({2304, 768}), h.r.tensor({2304})});
  h.check_f32_bf16(OpId::Linear, {h.r.tensor({256, 768}), h.r.tensor({768, 768})});
}

TEST_CASE("gpu kernels: full, iota, pack and unpack", "[gpu][kernels]") {
  Harness h;
  const std::string cpu = "cpu";  // place() moves it to cuda:0
  for (DType d : kAll)
    for (int i = 0; i < 4; ++i) {
      const Shape s = i == 0 ? Shape{3, 1001} : h.r.shape(0, 3);
      h.check(OpId::Full, {},
              dtype_attr(d).set("shape", IntList(s)).set("value", i == 1 ? 0.0 : -2.5).set("device", cpu));
      // iota: every dtype but bool; bf16 holds integers exactly up to 256 only.
      const int64_t length = i == 0 && d != DType::bf16 ? 5000 : h.r.uniform_int(0, 100);
      if (d != DType::boolean)
        h.check(OpId::Iota, {}, dtype_attr(d).set("length", length).set("device", cpu));
      std::vector<Arg> parts;
      IntLists shapes;
      int64_t total = 0;
      for (int64_t k = h.r.uniform_int(1, 4); k > 0; --k) {
        parts.push_back(h.r.tensor(i == 0 && k == 1 ? Shape{33, 101} : h.r.shape(0, 3), d));
        shapes.push_back(IntList(parts.back().type.shape));
        total += numel(parts.back().type.shape);
      }
      h.check(OpId::Pack, parts);
      h.check(OpId::Unpack, {h.r.tensor({total}, d)}, Attrs{{"shapes", shapes}});
    }
}

TEST_CASE("gpu kernels: gelu, softmax over any dim, layer_norm", "[gpu][kernels]") {
  Harness h;
  for (int i = 0; i < kShapes; ++i) {
    const Shape s = i == 0 ? Shape{1000} : i == 1 ? Shape{4, 3072} : h.r.shape(0, 4);
    h.check_f32_bf16(OpId::Gelu, {h.r.tensor(s, DType::f32, 3.0)}, Attrs{{"approximate", std::string("tanh")}});
  }
  std::vector<std::pair<Shape, int64_t>> softmax{
      {{7, 3000}, 1}, {{64, 1024}, 1}, {{2, 4, 129, 2048}, 3}, {{1000, 3, 5}, 0}, {{2, 2048, 3}, 1}};
  for (int i = 0; i < 2 * kShapes; ++i) {
    const Shape s = h.r.shape(1, 4);
    softmax.emplace_back(s, h.r.uniform_int(0, static_cast<int64_t>(s.size()) - 1));
  }
  for (const auto& [s, dim] : softmax)
    h.check_f32_bf16(OpId::Softmax, {h.r.tensor(s, DType::f32, 4.0)}, Attrs{{"dim", dim}});
  for (int i = 0; i < 2 * kShapes; ++i) {
    Shape s = i < 3 ? Shape{i == 2 ? 300 : 64} : h.r.shape(0, 2);
    s.push_back(i < 3 ? std::array<int64_t, 3>{768, 2048, 1024}[static_cast<size_t>(i)] : h.r.dim());
    Arg x = h.r.tensor(s);
    if (i % 3 == 1)
      for (double& v : x.data) v = static_cast<float>(v + 50.0);  // a one-pass variance would cancel
    const Shape c{s.back()};
    h.check_f32_bf16(OpId::LayerNorm, {x, h.r.tensor(c), h.r.tensor(c)}, Attrs{{"eps", 1e-5}});
  }
}

TEST_CASE("gpu kernels: scaled_dot_product_attention (causal and not) and cross_entropy", "[gpu][kernels]") {
  Harness h;
  for (int i = 0; i < 2 * kShapes; ++i) {
    const Shape batch = h.r.shape(0, 2);
    const int64_t tq = h.r.dim(), tk = i == 0 ? 0 : h.r.dim(), d = h.r.dim(false), dv = h.r.dim();
    auto with = [&](int64_t a, int64_t b) {
      Shape s = batch;
      s.insert(s.end(), {a, b});
      return h.r.tensor(s);
    };
    const Attrs attrs{{"is_causal", i % 2 == 0}, {"scale", h.r.uniform(0.1, 1.0)}};
    h.check_f32_bf16(OpId::ScaledDotProductAttention, {with(tq, d), with(tk, d), with(tk, dv)}, attrs);
  }
  // [heads, Tq, Tk, D] of two sequences: blocks of query rows, Tq != Tk, and a GPT-2 layer's.
  const std::array<std::array<int64_t, 4>, 5> big{
      {{2, 70, 70, 16}, {1, 530, 530, 16}, {2, 200, 150, 8}, {1, 150, 300, 32}, {12, 256, 256, 64}}};
  for (const auto& [heads, tq, tk, d] : big)
    for (bool causal : {true, false})
      h.check_f32_bf16(OpId::ScaledDotProductAttention,
                       {h.r.tensor({2, heads, tq, d}), h.r.tensor({2, heads, tk, d}), h.r.tensor({2, heads, tk, d})},
                       Attrs{{"is_causal", causal}, {"scale", 1.0 / std::sqrt(static_cast<double>(d))}});
  for (int i = 0; i < 2 * kShapes; ++i) {
    const Shape rows = i == 0 ? Shape{128} : i == 1 ? Shape{4} : h.r.shape(0, 2);
    Shape s = rows;
    s.push_back(i == 0 ? 5000 : i == 1 ? 50257 : h.r.dim(false));
    const Arg targets = h.r.indices(rows, i % 2 ? DType::i32 : DType::i64, s.back());
    h.check_f32_bf16(OpId::CrossEntropy, {h.r.tensor(s, DType::f32, 3.0), targets});
  }
}
