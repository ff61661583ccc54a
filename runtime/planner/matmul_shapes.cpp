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
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "executors/bf16.h"
#include "executors/cpu/cpu_executor.h"
#include "ir/error.h"
#include "runtime/io/files.h"
#include "runtime/planner/matmul_probe.h"
#include "runtime/interpreter.h"
#include "runtime/planner/planner.h"

namespace fsdpc {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

MatmulSample square_matmul(int64_t n, DType dtype) {
  MatmulSample s;
  TensorType t;
  t.shape = {n, n};
  t.dtype = dtype;
  s.statement.op = OpId::Matmul;
  Proxy out;
  out.name = "out";
  out.type = t;
  s.statement.outputs.push_back(out);
  s.inputs = {t, t};
  return s;
}

struct SampleCall::Buffers {
  Allocator alloc;
  std::vector<TensorValue> keep;
  std::vector<TensorView> in, out;
  KernelFn kernel = nullptr;
  KernelContext ctx;

  void* filled(const TensorType& t) {
    keep.push_back(allocate_tensor(alloc, t, MemCategory::activations));
    void* data = keep.back().data();
    std::memset(data, 0, static_cast<size_t>(numel(t.shape)) * dtype_size(t.dtype));  // masks, indices
    if (t.dtype == DType::f32) std::fill_n(static_cast<float*>(data), numel(t.shape), 0.01f);
    if (t.dtype == DType::f64) std::fill_n(static_cast<double*>(data), numel(t.shape), 0.01);
    if (t.dtype == DType::bf16) std::fill_n(static_cast<uint16_t*>(data), numel(t.shape), f32_to_bf16(0.01f));
    return data;
  }
};

SampleCall::SampleCall(const MatmulSample& s) : sample_(s), buffers_(std::make_unique<Buffers>()) {
  for (const TensorType& t : s.inputs) buffers_->in.push_back({buffers_->filled(t), &t});
  for (const Proxy& p : s.statement.outputs) buffers_->out.push_back({buffers_->filled(p.type), &p.type});
  buffers_->kernel = cpu_executor().kernel(s.statement.op);
}

SampleCall::~SampleCall() = default;

double SampleCall::operator()() {
  const auto t0 = Clock::now();
  buffers_->kernel(buffers_->ctx, sample_.statement, buffers_->in, buffers_->out);
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double kernel_call_seconds(const MatmulSample& s, double budget, int min_reps) {
  SampleCall call(s);
  return best_seconds([&] { call(); }, budget, min_reps);
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

namespace {

// Seconds of each sample's work (its call less an 8x8x8 matmul's), timed on
// `world` ranks at once by `mpirun fsdpc matmul-probe`; empty, with a line
// saying why, when it cannot run.
std::vector<double> concurrent_seconds(const std::vector<MatmulSample>& samples, int world) {
  try {
    const nlohmann::json j = nlohmann::json::parse(run_probe(world, matmul_probe_input(samples), [](const std::string& dir) {
      return "matmul-probe --traces " + shell_quote(dir + "/input") + " --out " + shell_quote(dir + "/out.json");
    }));
    const double call = j.at("call").get<double>();
    std::vector<double> seconds;
    for (const nlohmann::json& s : j.at("seconds")) seconds.push_back(std::max(0.0, s.get<double>() - call));
    if (seconds.size() != samples.size()) fail(seconds.size(), " timings for ", samples.size(), " shapes");
    return seconds;
  } catch (const std::exception& e) {  // nlohmann's errors too: a probe's bad output is not the user's
    std::fprintf(stderr, "fsdpc advise: the matmul probe gave nothing (%s); shapes timed in this process alone, "
                         "without the other ranks' contention\n", e.what());
    return {};
  }
}

}  // namespace

void measure_matmul_shapes(HardwareProfile& p, const std::map<std::string, MatmulSample>& samples, int world) {
  if (samples.empty()) return;
  const auto t0 = Clock::now();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Ranks beyond the cores take turns on them, as measure_local_hardware
  // scales; at any moment `cores` of them run, so that many are timed
  // together (more would time the scheduler's slices, not the kernels).
  const double turns = world > cores ? static_cast<double>(world) / cores : 1.0;
  const int together_ranks = std::min(world, cores);
  std::vector<MatmulSample> in_order;
  for (const auto& [key, s] : samples) in_order.push_back(s);
  const std::vector<double> together =
      together_ranks > 1 ? concurrent_seconds(in_order, together_ranks) : std::vector<double>{};
  // An 8x8x8 matmul: the call itself, which matmul_overhead already charges.
  const double call = together.empty() ? kernel_call_seconds(square_matmul(8), 0.02, 20) : 0;
  size_t timed = 0, i = 0;
  for (const auto& [key, s] : samples) {
    try {
      const double seconds = together.empty() ? std::max(0.0, kernel_call_seconds(s, 0.05, 3) - call) : together[i];
      p.matmul_seconds[key] = seconds * turns;
      ++timed;
    } catch (const Error& e) {  // priced by the rate instead, as an unmeasured profile would
      std::fprintf(stderr, "fsdpc advise: matmul shape not timed (%s), priced at the sgemm rate: %s\n", e.what(),
                   key.c_str());
    }
    ++i;
  }
  const std::string threads = std::to_string(cpu_threads()) + " thread(s) per rank";
  const std::string scaled = turns > 1 ? ", scaled by ranks/cores" : "";
  p.matmul_seconds_source =
      together.empty()
          ? "measured: best of repeated calls of each matmul statement's CPU executor kernel (oneDNN) on its own "
            "shapes, less an 8x8x8 matmul's call (matmul_overhead charges that), " + threads + scaled
          : "measured: `mpirun -np " + std::to_string(together_ranks) +
                " fsdpc matmul-probe`, every rank calling each matmul statement's CPU executor kernel (oneDNN) at "
                "once, as a step's ranks do; the slowest rank's median call less an 8x8x8 matmul's (matmul_overhead "
                "charges that), " + threads + scaled;
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  const char* how = together.empty() ? "" : " on every rank at once";
  if (p.file.empty()) {
    std::fprintf(stderr, "fsdpc advise: %zu matmul shapes measured%s in %.1f s\n", timed, how, took);
    return;
  }
  try {
    write_file_atomically(p.file, hardware_profile_json(p));
    std::fprintf(stderr, "fsdpc advise: %zu matmul shapes measured%s in %.1f s, cached in %s\n", timed, how, took,
                 p.file.c_str());
  } catch (const Error& e) {  // an unwritable cache costs a measurement next time, not this run
    std::fprintf(stderr, "fsdpc advise: %zu matmul shapes measured%s in %.1f s, not cached (%s)\n", timed, how, took,
                 e.what());
  }
}

}  // namespace fsdpc
