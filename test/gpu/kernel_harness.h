// The harness the CUDA kernel tests (gpu_kernels_test.cpp,
// gpu_nn_kernels_test.cpp) share: host encodings of each dtype's bytes (bf16
// as the device stores it), one-op cases and their traces, the tolerances
// each op is held to, a seeded generator of shapes and values, Harness,
// which runs a case on the CPU executor and on cuda:0 and compares, and the
// record of which ops were compared (kernel_coverage.h).
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "executors/cuda/cuda_backend.h"
#include "executors/cuda/cuda_context.h"
#include "executors/device_backend.h"
#include "executors/executor.h"
#include "ir/trace.h"
#include "runtime/allocator.h"

namespace fsdpc::gpu_test {

using Data = std::vector<double>;

inline constexpr int kShapes = 12;  // random shapes per op and variant
inline const Device kGpu{DeviceKind::cuda, 0};
inline constexpr DType kAll[] = {DType::f32, DType::bf16, DType::f64, DType::i32, DType::i64, DType::boolean};

// bf16 as the device stores it: the high half of an f32, rounded to nearest even.
uint16_t bf16_bits(double v);
double bf16_value(uint16_t b);
double round_bf16(double v);

// Calls f(T{}) with the host type of dtype d's bytes: bf16 as its bits, bool as one byte.
template <class F>
void with_bytes_type(DType d, F&& f) {
  switch (d) {
    case DType::f32: return f(float{});
    case DType::bf16: return f(uint16_t{});
    case DType::f64: return f(double{});
    case DType::i32: return f(int32_t{});
    case DType::i64: return f(int64_t{});
    case DType::i8: return f(int8_t{});
    case DType::boolean: return f(uint8_t{});
    default: FAIL("no host encoding for " << dtype_name(d));
  }
}

std::vector<std::byte> encode(DType d, const Data& values);
Data decode(DType d, const std::vector<std::byte>& bytes);

// An operand of a one-op case (a tensor with values, or a scalar literal),
// or an output read back to the host.
struct Arg {
  TensorType type;
  Data data;
  std::optional<double> scalar;
};
inline Arg lit(double v) { return Arg{{}, {}, v}; }

inline Attrs dtype_attr(DType d) { return Attrs{{"dtype", std::string(dtype_name(d))}}; }

// The same case with its f32 tensors stored as bf16 (values rounded).
std::vector<Arg> as_bf16(std::vector<Arg> args);

// The one-statement trace of `op` on `device`, composites without their
// decomposition, so the kernels under test are what runs.
Trace one_op_trace(OpId op, const std::vector<Arg>& args, Attrs attrs, const Device& device);

// Ops whose float outputs cancel from larger terms: held to the precision of
// their terms, a tenth of the largest output (the floors of cpu_executor_test).
double cancelling_floor(OpId op);

// Ops that move, select, negate or convert values: their bf16 outputs are exact.
bool exact_in_bf16(OpId op);

// |got - want| <= rtol * (|want| + floor * max(1, max |want|)); NaN matches
// NaN and infinities match exactly; integers and bools exactly.
void check_close(const Data& got, const Data& want, bool exact, double rtol, double floor);

// 42, or FSDPC_TEST_SEED to shake out tolerance edges.
uint64_t test_seed();

// Seeded by test_seed().
struct Rng {
  std::mt19937_64 gen{test_seed()};

  int64_t uniform_int(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen); }
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(gen); }
  // Small dims, 0 and 1 often, now and then a long one for the tails.
  int64_t dim(bool allow_empty = true);
  Shape shape(int min_rank, int max_rank, bool allow_empty = true);
  // Floats normal(0, stddev), exact in the dtype; integers in [-5, 5]; bools.
  Arg tensor(Shape s, DType d = DType::f32, double stddev = 1.0);
  Arg uniform_tensor(Shape s, double lo, double hi);
  Arg indices(Shape s, DType d, int64_t bound);  // in [0, bound), repeats happen
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
  std::vector<Arg> run(const Trace& t, const std::vector<Data>& inputs, bool gpu);

  // Runs `op` on both sides and compares. bf16 tensors (and dtype=bf16)
  // are f32 on the CPU, and the GPU trace is then built on cuda:0 as it is;
  // an all-f32 case's GPU trace is the CPU trace placed on cuda:0.
  void check(OpId op, const std::vector<Arg>& args, const Attrs& attrs = {});
  // Float ops: in f32, then with every f32 tensor stored as bf16.
  void check_f32_bf16(OpId op, const std::vector<Arg>& args, const Attrs& attrs = {});
  // As check, but the CPU runs the very trace the GPU does, bf16 tensors
  // included: for ops whose CPU kernels hold bf16 values where the GPU's
  // do (the fused head rounds its logits to bf16), so that even their f32
  // outputs agree to f32 rounding in f32 and to 1e-2 with bf16 operands.
  void check_as_stored(OpId op, const std::vector<Arg>& args, const Attrs& attrs = {});
};

// Declares, at namespace scope, the ops this executable's cases compare (a
// list of kernel_coverage.h): `const ComparesOps kCoverage(kComparedBy...);`.
struct ComparesOps {
  explicit ComparesOps(std::span<const OpId> ops);
};

// The ops declared by ComparesOps that no Harness::check compared in this
// process, and those compared that none declared. gpu_test_main.cpp fails a
// run of every case unless both are empty.
struct CoverageGap {
  std::vector<OpId> uncompared, undeclared;
};
CoverageGap coverage_gap();

}  // namespace fsdpc::gpu_test
