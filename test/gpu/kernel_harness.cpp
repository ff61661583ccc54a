// The CUDA kernel tests' shared harness (kernel_harness.h): bf16 and host
// byte encodings, one-op traces, per-op tolerances and the comparison, the
// seeded generator, Harness running a case on the CPU and on cuda:0, and
// the record of the ops compared.
#include "kernel_harness.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <set>
#include <string>
#include <utility>

#include "executors/claim.h"
#include "executors/cpu/cpu_executor.h"
#include "executors/cuda/cuda_executor.h"
#include "ir/builder.h"
#include "ir/printer.h"
#include "passes/place.h"
#include "runtime/interpreter.h"

namespace fsdpc::gpu_test {

namespace {

// Function-local statics: ComparesOps runs during static initialization.
std::set<OpId>& declared_ops() {
  static std::set<OpId> ops;
  return ops;
}

std::set<OpId>& compared_ops() {
  static std::set<OpId> ops;
  return ops;
}

}  // namespace

ComparesOps::ComparesOps(std::span<const OpId> ops) { declared_ops().insert(ops.begin(), ops.end()); }

CoverageGap coverage_gap() {
  CoverageGap gap;
  std::ranges::set_difference(declared_ops(), compared_ops(), std::back_inserter(gap.uncompared));
  std::ranges::set_difference(compared_ops(), declared_ops(), std::back_inserter(gap.undeclared));
  return gap;
}

uint16_t bf16_bits(double v) {
  const auto f = static_cast<float>(v);
  if (std::isnan(f)) return 0x7fc0;
  const auto u = std::bit_cast<uint32_t>(f);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
double bf16_value(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }
double round_bf16(double v) { return bf16_value(bf16_bits(v)); }

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

std::vector<Arg> as_bf16(std::vector<Arg> args) {
  for (Arg& a : args)
    if (!a.scalar && a.type.dtype == DType::f32) {
      a.type.dtype = DType::bf16;
      std::transform(a.data.begin(), a.data.end(), a.data.begin(), round_bf16);
    }
  return args;
}

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

namespace {

bool is_one_of(OpId op, std::initializer_list<OpId> ops) { return std::find(ops.begin(), ops.end(), op) != ops.end(); }

}  // namespace

double cancelling_floor(OpId op) {
  return is_one_of(op, {OpId::Matmul, OpId::Linear, OpId::ScaledDotProductAttention, OpId::LayerNorm, OpId::Gelu,
                        OpId::CrossEntropy, OpId::IndexAdd, OpId::LinearCrossEntropy, OpId::LinearCrossEntropyGrad,
                        OpId::LinearCrossEntropyWithGrad,
                        OpId::LinearCrossEntropyStats, OpId::LinearCrossEntropyStatsGrad}) ? 0.1 : 1e-6;
}

bool exact_in_bf16(OpId op) {
  return is_one_of(op, {OpId::ConvertElementType, OpId::Full, OpId::Iota, OpId::Where, OpId::Reshape,
                        OpId::Permute, OpId::BroadcastInDim, OpId::Slice, OpId::Pad, OpId::Cat, OpId::Take,
                        OpId::Pack, OpId::Unpack, OpId::Neg, OpId::Maximum, OpId::Amax});
}

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

uint64_t test_seed() { return std::getenv("FSDPC_TEST_SEED") ? std::stoull(std::getenv("FSDPC_TEST_SEED")) : 42; }

int64_t Rng::dim(bool allow_empty) {
  const double u = uniform(0.0, 1.0);
  if (allow_empty && u < 0.08) return 0;
  return u < 0.25 ? 1 : u < 0.9 ? uniform_int(2, 9) : uniform_int(10, 70);
}

Shape Rng::shape(int min_rank, int max_rank, bool allow_empty) {
  Shape s(static_cast<size_t>(uniform_int(min_rank, max_rank)));
  for (int64_t& d : s) d = dim(allow_empty);
  return s;
}

Arg Rng::tensor(Shape s, DType d, double stddev) {
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

Arg Rng::uniform_tensor(Shape s, double lo, double hi) {
  Arg a = tensor(std::move(s));
  for (double& x : a.data) x = static_cast<float>(uniform(lo, hi));
  return a;
}

Arg Rng::indices(Shape s, DType d, int64_t bound) {
  Arg a = tensor(std::move(s), d);
  for (double& x : a.data) x = static_cast<double>(uniform_int(0, bound - 1));
  return a;
}

std::vector<Arg> Harness::run(const Trace& t, const std::vector<Data>& inputs, bool gpu) {
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

void Harness::check(OpId op, const std::vector<Arg>& args, const Attrs& attrs) {
  compared_ops().insert(op);
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

void Harness::check_as_stored(OpId op, const std::vector<Arg>& args, const Attrs& attrs) {
  compared_ops().insert(op);
  std::vector<Data> inputs;
  bool bf16 = false;
  for (const Arg& a : args) {
    if (a.scalar) continue;
    inputs.push_back(a.data);
    bf16 = bf16 || a.type.dtype == DType::bf16;
  }
  const Trace cpu_trace = one_op_trace(op, args, attrs, Device{});
  const Trace gpu_trace = one_op_trace(op, args, attrs, kGpu);
  INFO(print_trace(gpu_trace));
  const std::vector<Arg> want = run(cpu_trace, inputs, false);
  const std::vector<Arg> got = run(gpu_trace, inputs, true);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("output " << i);
    REQUIRE(got[i].type.shape == want[i].type.shape);
    REQUIRE(got[i].type.dtype == want[i].type.dtype);
    REQUIRE(got[i].type.device == kGpu);
    check_close(got[i].data, want[i].data, !is_float(got[i].type.dtype), bf16 ? 1e-2 : 1e-5, cancelling_floor(op));
  }
}

void Harness::check_f32_bf16(OpId op, const std::vector<Arg>& args, const Attrs& attrs) {
  check(op, args, attrs);
  check(op, as_bf16(args), attrs);
}

}  // namespace fsdpc::gpu_test
