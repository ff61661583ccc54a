// plan_training (runtime/planner/planner.h): the whole of `fsdpc advise`
// but for its flags and its printing. Every strategy is compiled for the
// world, planned and simulated on the hardware profile, and ranked.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "executors/claim.h"
#include "ir/error.h"
#include "passes/place.h"
#include "runtime/planner/planner.h"

namespace fsdpc {

namespace {

// Tokens one rank trains on per step: batch x sequence for token ids, else
// the batch (rows of the first input).
int64_t tokens_per_rank(const Trace& t) {
  if (t.args.empty() || t.args[0].type.shape.empty()) return 1;
  const TensorType& x = t.args[0].type;
  const bool ids = x.dtype == DType::i64 || x.dtype == DType::i32;
  return ids && x.shape.size() >= 2 ? x.shape[0] * x.shape[1] : x.shape[0];
}

// The target the candidates compile for: the request's, else the
// profile's, else (a cuda profile in a build without CUDA) cpu, said on stderr.
Target choose_target(const PlanRequest& r, const HardwareProfile& hw) {
  if (r.executor) {
    executors_for(*r.executor);  // cuda in a CPU-only build fails here
    return *r.executor;
  }
  try {
    executors_for(hw.executor);
    return hw.executor;
  } catch (const Error&) {
    std::fprintf(stderr, "fsdpc advise: this build has no %s executor; compiling for cpu (memory rounds as the CPU's)\n",
                 std::string(target_name(hw.executor)).c_str());
    return Target::cpu;
  }
}

std::vector<int> sorted_unique(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

}  // namespace

Plan plan_training(const PlanRequest& r, const std::function<Trace(int64_t)>& capture) {
  const auto t0 = std::chrono::steady_clock::now();
  Plan p;
  AdviseSetup& s = p.setup;
  s.world = r.world;
  s.mesh = r.mesh;
  s.strategies = r.strategies;
  s.sequence_parallel = r.sequence_parallel;
  s.tensor_parallel_plan = r.tensor_parallel_plan;
  s.loss_chunk = r.loss_chunk;
  if (r.diloco.enabled()) check_diloco_options(r.diloco, Strategy::hybrid);
  s.diloco = r.diloco;
  s.int8_gathers = r.int8_gathers;
  s.tps = sorted_unique(r.tps);  // each size once, smallest first
  s.pps = sorted_unique(r.pps);
  s.micro_batches = r.micro_batches;
  std::vector<Candidate> cs = enumerate_candidates(s);  // a mesh that does not fit fails before any measuring
  s.hw = load_hardware(r.hardware, r.world);
  s.target = choose_target(r, s.hw);
  s.precision = r.precision.value_or(s.hw.precision);
  if (s.precision == DType::f16 && s.target == Target::cpu)
    fail("--precision f16: the cpu executor's kernels hold f32 and bf16 (a cuda profile or --executor cuda runs f16)");
  p.cap_source = "--mem-cap";
  if (r.mem_cap) {
    s.cap = *r.mem_cap;
  } else if (s.hw.memory_capacity.value > 0) {
    s.cap = static_cast<int64_t>(s.hw.memory_capacity.value);
    p.cap_source = "the profile's compute.memory_capacity";
  }
  s.threads = r.threads > 0 ? r.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const Device device = target_device(s.target);
  s.captured = place(capture(0), device);
  s.tokens_per_rank = tokens_per_rank(s.captured);
  for (int tp : s.tps) {
    if (tp == 1 || s.tp_captured.count(tp) || s.captured.args.empty() || s.captured.args[0].type.shape.empty()) continue;
    s.tp_captured.emplace(tp, place(capture(s.captured.args[0].type.shape[0] * tp), device));
  }
  prepare_pipelines(s, cs, [&](int64_t batch) { return place(capture(batch), device); });
  // Under local, the matmuls of the candidates are timed here on their own
  // shapes (once: they are cached with the profile), then the candidates
  // are priced again with them. Only the cpu executor's kernels run here.
  MatmulShapes unmeasured;
  if (r.hardware == "local" && s.target == Target::cpu) s.unmeasured = &unmeasured;
  const std::vector<Candidate> unevaluated = s.unmeasured ? cs : std::vector<Candidate>{};
  evaluate_candidates(s, cs);
  double measuring = 0;
  if (std::map<std::string, MatmulSample> samples = unmeasured.take(); !samples.empty()) {
    const auto m0 = std::chrono::steady_clock::now();
    measure_matmul_shapes(s.hw, samples, s.world);
    measuring = std::chrono::duration<double>(std::chrono::steady_clock::now() - m0).count();
    s.unmeasured = nullptr;
    cs = unevaluated;
    evaluate_candidates(s, cs);
  }
  rank_candidates(cs);
  p.candidates = std::move(cs);
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - measuring;
  return p;
}

}  // namespace fsdpc
