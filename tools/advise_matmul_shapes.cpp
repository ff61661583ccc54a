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
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <unordered_map>
#include <utility>

#include "executors/cpu/cpu_executor.h"
#include "ir/error.h"
#include "tools/advise.h"
#include "tools/cli_io.h"

namespace fsdpc::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<void, FreeDeleter>;

// A 64-byte aligned buffer for `t`, floats set to a small value (zeros
// elsewhere: masks and indices), so no denormal or NaN slows the kernel.
Buffer buffer_for(const TensorType& t) {
  const size_t bytes = static_cast<size_t>(numel(t.shape)) * dtype_size(t.dtype);
  const size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  Buffer b(std::aligned_alloc(64, rounded));
  if (!b) fail("measuring matmul shapes: cannot allocate ", rounded, " bytes for ", type_str(t));
  std::memset(b.get(), 0, rounded);
  if (t.dtype == DType::f32) std::fill_n(static_cast<float*>(b.get()), numel(t.shape), 0.01f);
  if (t.dtype == DType::f64) std::fill_n(static_cast<double*>(b.get()), numel(t.shape), 0.01);
  return b;
}

// Best seconds of one call of `s`'s kernel: a warm-up call (oneDNN builds
// its primitive, pages are touched), then at least `min_reps` timed calls,
// more while they fill less than `budget` seconds (at most 50).
double best_call_seconds(const MatmulSample& s, double budget, int min_reps) {
  std::vector<Buffer> keep;
  std::vector<TensorView> in, out;
  for (const TensorType& t : s.inputs) {
    keep.push_back(buffer_for(t));
    in.push_back({keep.back().get(), &t});
  }
  for (const Proxy& p : s.statement.outputs) {
    keep.push_back(buffer_for(p.type));
    out.push_back({keep.back().get(), &p.type});
  }
  const KernelFn kernel = cpu_executor().kernel(s.statement.op);
  KernelContext ctx;
  kernel(ctx, s.statement, in, out);
  double best = 1e30, total = 0;
  for (int rep = 0; rep < 50 && (rep < min_reps || total < budget); ++rep) {
    const auto t0 = Clock::now();
    kernel(ctx, s.statement, in, out);
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::min(best, sec);
    total += sec;
  }
  return best;
}

// An 8x8x8 matmul: the call itself, which the profile's matmul_overhead
// already charges every matmul.
MatmulSample negligible_matmul() {
  MatmulSample s;
  TensorType t;
  t.shape = {8, 8};
  s.statement.op = OpId::Matmul;
  Proxy out;
  out.name = "out";
  out.type = t;
  s.statement.outputs.push_back(out);
  s.inputs = {t, t};
  return s;
}

}  // namespace

void MatmulShapes::collect(const Trace& t, const HardwareProfile& hw) {
  std::unordered_map<std::string, const TensorType*> types;
  for (const Proxy& a : t.args) types[a.name] = &a.type;
  InputTypes inputs;
  for (const BoundSymbol& b : t.bsyms) {
    inputs.clear();
    for (const Operand& o : b.inputs) {
      auto it = o.is_scalar() ? types.end() : types.find(o.name);
      inputs.push_back(it == types.end() ? nullptr : it->second);
    }
    for (const Proxy& p : b.outputs) types[p.name] = &p.type;
    std::string key = matmul_signature(b, inputs);
    if (key.empty() || hw.matmul_seconds.count(key)) continue;
    if (std::find(inputs.begin(), inputs.end(), nullptr) != inputs.end()) continue;  // a scalar operand: not a shape
    std::lock_guard<std::mutex> lock(mutex_);
    if (missing_.count(key)) continue;
    MatmulSample s;
    s.statement = b;
    for (const TensorType* in : inputs) s.inputs.push_back(*in);
    missing_.emplace(std::move(key), std::move(s));
  }
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
  const double call = best_call_seconds(negligible_matmul(), 0.02, 20);
  size_t timed = 0;
  for (const auto& [key, s] : samples) {
    try {
      const double seconds = best_call_seconds(s, 0.05, 3);
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
