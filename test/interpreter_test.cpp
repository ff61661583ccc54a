// The runtime interpreter on a world of one: the final forward and backward
// traces of the pipeline, claimed by the CPU and MPI executors, give the
// float64 reference's loss and gradients, and the allocator's measured peak
// stays within what the trace's lifetimes (del) predict.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "executors/claim.h"
#include "executors/comm/mpi_executor.h"
#include "executors/cpu/cpu_executor.h"
#include "executors/reference/reference.h"
#include "frontend/models/registry.h"
#include "passes/grad.h"
#include "passes/pipeline.h"
#include "passes/stats.h"
#include "runtime/interpreter.h"

using namespace fsdpc;

namespace {

std::vector<double> to_doubles(const TensorValue& v) {
  std::vector<double> out(static_cast<size_t>(numel(v.type.shape)));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (v.type.dtype) {
      case DType::f32: out[i] = static_cast<const float*>(v.data())[i]; break;
      case DType::i64: out[i] = static_cast<double>(static_cast<const int64_t*>(v.data())[i]); break;
      default: FAIL("unexpected dtype");
    }
  }
  return out;
}

TensorValue from_doubles(Allocator& a, const TensorType& t, const std::vector<double>& data, MemCategory c) {
  TensorValue v = allocate_tensor(a, t, c);
  for (size_t i = 0; i < data.size(); ++i) {
    if (t.dtype == DType::f32) static_cast<float*>(v.data())[i] = static_cast<float>(data[i]);
    else static_cast<int64_t*>(v.data())[i] = static_cast<int64_t>(data[i]);
  }
  return v;
}

}  // namespace

TEST_CASE("gpt2-tiny forward and backward run on the CPU and match the reference", "[runtime]") {
  CaptureOptions co;
  co.batch = 2;
  co.seq = 16;
  PipelineOptions po;
  po.mesh = flat_mesh(1);
  po.bucketing = true;
  std::vector<Stage> stages = compile(capture(*make_model("gpt2-tiny"), co), po);
  MpiContext mpi(po.mesh);
  const std::vector<const Executor*> executors = {&cpu_executor(), &mpi_executor()};
  const Trace fwd = claim(stages.back().traces[0], executors);
  const Trace bwd = claim(stages.back().traces[1], executors);

  std::mt19937 rng(7);
  std::normal_distribution<double> normal(0.0, 0.02);
  std::uniform_int_distribution<int> token(0, 255);
  std::vector<reference::Value> ref_args;
  for (const Proxy& p : fwd.args) {
    reference::Value v{p.type, std::vector<double>(static_cast<size_t>(numel(p.type.shape)))};
    for (double& x : v.data) x = p.type.dtype == DType::i64 ? token(rng) : normal(rng);
    if (p.name == fsdpc::kCotangentArg) v.data = {1.0};  // the fused head's gradients in the forward
    ref_args.push_back(std::move(v));
  }
  std::vector<reference::Value> ref_fwd = reference::run(fwd, ref_args);

  Allocator alloc;
  Interpreter interp(alloc, executors, mpi, [&] { mpi.progress(); });
  std::vector<TensorValue> args;
  for (size_t i = 0; i < fwd.args.size(); ++i)
    args.push_back(from_doubles(alloc, fwd.args[i].type, ref_args[i].data,
                                fwd.args[i].is_param() ? MemCategory::parameters : MemCategory::activations));
  std::vector<TensorValue> params;  // the caller keeps its parameters (persistent state)
  for (size_t i = 0; i < args.size(); ++i)
    if (fwd.args[i].is_param()) params.push_back(args[i]);
  const int64_t before = alloc.stats().total_live;
  alloc.reset_peaks();
  std::vector<TensorValue> out = interp.run(fwd, args);
  args.clear();
  REQUIRE(out.size() == ref_fwd.size());
  CHECK(to_doubles(out[0])[0] == Approx(ref_fwd[0].data[0]).epsilon(1e-4));
  // Measured peak within the trace statistic's prediction (which counts
  // reshape views and wait buffers as new bytes, so it is an upper bound).
  CHECK(alloc.stats().total_peak - before <= trace_stats(fwd).peak_live_bytes);

  // Backward: saved values plus the loss cotangent 1.0 (unless the forward
  // took it: head_grad_forward).
  std::vector<TensorValue> bargs(out.begin() + 1, out.end());
  std::vector<reference::Value> ref_bargs(ref_fwd.begin() + 1, ref_fwd.end());
  if (bwd.args.back().name == fsdpc::kCotangentArg) {
    const TensorType& ct = bwd.args.back().type;
    bargs.push_back(from_doubles(alloc, ct, {1.0}, MemCategory::activations));
    ref_bargs.push_back(reference::Value{ct, {1.0}});
  }
  for (size_t i = 0; i < bargs.size(); ++i) ref_bargs[i].type = bwd.args[i].type;
  out.clear();
  std::vector<reference::Value> ref_grads = reference::run(bwd, ref_bargs);
  std::vector<TensorValue> grads = interp.run(bwd, std::move(bargs));
  REQUIRE(grads.size() == ref_grads.size());
  for (size_t g = 0; g < grads.size(); ++g) {
    std::vector<double> got = to_doubles(grads[g]);
    double scale = 1e-6;
    for (double x : ref_grads[g].data) scale = std::max(scale, std::abs(x));
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - ref_grads[g].data[i]));
    INFO("gradient " << g);
    CHECK(worst / scale < 1e-3);
  }
  // What is still live: the parameters and the gradients; every activation
  // and communication buffer was freed by the trace's dels.
  grads.clear();
  CHECK(alloc.stats().live[static_cast<size_t>(MemCategory::activations)] == 0);
  CHECK(alloc.stats().live[static_cast<size_t>(MemCategory::communication)] == 0);
}
