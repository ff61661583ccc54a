// --hardware local's matmul shapes: every distinct matmul statement the
// candidates run (matmul, linear, attention, a matmul reading transposes in
// place), timed here through the CPU executor's kernel on its own shapes.
// One square sgemm's rate misprices a model's step: its matmuls run below or
// above it, each by its own amount (on the development VM the 4x512
// GPT-2's ran at 78% (causal attention) to 103% of a 640^3 probe's rate on
// one thread; gpt2-tiny's small ones far below).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>

#include "executors/cpu/cpu_executor.h"
#include "ir/error.h"
#include "runtime/interpreter.h"
#include "tools/advise.h"
#include "tools/cli_io.h"

namespace fsdpc::cli {

namespace {

using Clock = std::chrono::steady_clock;

// A tensor of `t` from `alloc`, floats set to a small value (zeros
// elsewhere: masks and indices), so no denormal or NaN slows the kernel.
TensorValue filled(Allocator& alloc, const TensorType& t) {
  TensorValue v = allocate_tensor(alloc, t, MemCategory::activations);
  std::memset(v.data(), 0, static_cast<size_t>(numel(t.shape)) * dtype_size(t.dtype));
  if (t.dtype == DType::f32) std::fill_n(static_cast<float*>(v.data()), numel(t.shape), 0.01f);
  if (t.dtype == DType::f64) std::fill_n(static_cast<double*>(v.data()), numel(t.shape), 0.01);
  return v;
}

}  // namespace

MatmulSample square_matmul(int64_t n) {
  MatmulSample s;
  TensorType t;
  t.shape = {n, n};
  s.statement.op = OpId::Matmul;
  Proxy out;
  out.name = "out";
  out.type = t;
  s.statement.outputs.push_back(out);
  s.inputs = {t, t};
  return s;
}

double kernel_call_seconds(const MatmulSample& s, double budget, int min_reps) {
  Allocator alloc;
  std::vector<TensorValue> keep;
  std::vector<TensorView> in, out;
  for (const TensorType& t : s.inputs) {
    keep.push_back(filled(alloc, t));
    in.push_back({keep.back().data(), &t});
  }
  for (const Proxy& p : s.statement.outputs) {
    keep.push_back(filled(alloc, p.type));
    out.push_back({keep.back().data(), &p.type});
  }
  const KernelFn kernel = cpu_executor().kernel(s.statement.op);
  KernelContext ctx;
  return best_seconds([&] { kernel(ctx, s.statement, in, out); }, budget, min_reps);
}

void MatmulShapes::collect(const Trace& t, const HardwareProfile& hw) {
  for_each_statement(t, [&](const BoundSymbol& b, const InputTypes& inputs) {
    std::string key = matmul_signature(b, inputs);
    if (key.empty() || hw.matmul_seconds.count(key)) return;
    if (std::find(inputs.begin(), inputs.end(), nullptr) != inputs.end()) return;  // a scalar operand: not a shape
    std::lock_guard<std::mutex> lock(mutex_);
    if (missing_.count(key)) return;
    MatmulSample s;
    s.statement = b;
    for (const TensorType* in : inputs) s.inputs.push_back(*in);
    missing_.emplace(std::move(key), std::move(s));
  });
}

std::map<std::string, MatmulSample> MatmulShapes::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(missing_, {});
}

void measure_matmul_shapes(HardwareProfile& p, const std::map<std::string, MatmulSample>& samples, int world) {
  if (samples.empty()) return;
  const auto t0 = Clock::now();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Ranks beyond the cores take turns on them, as measure_local_hardware scales.
  const double turns = world > cores ? static_cast<double>(world) / cores : 1.0;
  // An 8x8x8 matmul: the call itself, which matmul_overhead already charges.
  const double call = kernel_call_seconds(square_matmul(8), 0.02, 20);
  size_t timed = 0;
  for (const auto& [key, s] : samples) {
    try {
      const double seconds = kernel_call_seconds(s, 0.05, 3);
      p.matmul_seconds[key] = std::max(0.0, seconds - call) * turns;
      ++timed;
    } catch (const Error& e) {  // priced by the rate instead, as an unmeasured profile would
      std::fprintf(stderr, "fsdpc advise: matmul shape not timed (%s), priced at the sgemm rate: %s\n", e.what(),
                   key.c_str());
    }
  }
  p.matmul_seconds_source =
      "measured: best of repeated calls of each matmul statement's CPU executor kernel (oneDNN) on its own shapes, "
      "less an 8x8x8 matmul's call (matmul_overhead charges that), " + std::to_string(cpu_threads()) +
      " thread(s) per rank" + (turns > 1 ? ", scaled by ranks/cores" : "");
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  if (p.file.empty()) {
    std::fprintf(stderr, "fsdpc advise: %zu matmul shapes measured in %.1f s\n", timed, took);
    return;
  }
  try {
    write_output(p.file, hardware_profile_json(p));
    std::fprintf(stderr, "fsdpc advise: %zu matmul shapes measured in %.1f s, cached in %s\n", timed, took,
                 p.file.c_str());
  } catch (const Error& e) {  // an unwritable cache costs a measurement next time, not this run
    std::fprintf(stderr, "fsdpc advise: %zu matmul shapes measured in %.1f s, not cached (%s)\n", timed, took,
                 e.what());
  }
}

}  // namespace fsdpc::cli
