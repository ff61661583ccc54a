// Compile time of the whole pipeline (capture -> fsdp -> grad -> split ->
// bucketing -> schedule -> ... -> del) for GPT-2 of growing depth, as JSON.
// Reports the median over repetitions and time per layer, so linear growth
// in depth shows as a flat ms_per_layer. A benchmark: it asserts nothing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "frontend/models/gpt2/gpt2.h"
#include "passes/pipeline.h"

namespace {
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Row {
  std::string label;
  fsdpc::GPT2Config config;
};
}  // namespace

int main(int argc, char** argv) {
  int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  std::vector<Row> rows;
  for (int64_t depth : {12, 24, 48, 96}) rows.push_back({"gpt2-depth-" + std::to_string(depth), {depth, 12, 768, 50257, 1024, 1e-5}});
  rows.push_back({"gpt2-xl", {48, 25, 1600, 50257, 1024, 1e-5}});

  fsdpc::PipelineOptions options;
  options.strategy = fsdpc::Strategy::zero3;
  options.mesh = fsdpc::flat_mesh(8);
  options.bucketing = true;
  options.verify = false;  // the verifier runs in tests; here the passes alone

  std::printf("{\"benchmark\": \"pipeline\", \"strategy\": \"zero3\", \"world\": 8, \"bucketing\": \"unit\", "
              "\"reps\": %d, \"results\": [\n", reps);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::vector<double> capture_ms, total_ms;
    std::vector<std::pair<std::string, double>> pass_ms;  // of the last repetition
    size_t statements = 0;
    for (int r = 0; r < reps; ++r) {
      fsdpc::GPT2 model(rows[i].label, rows[i].config);
      auto t0 = Clock::now();
      fsdpc::Trace trace = fsdpc::capture(model);
      capture_ms.push_back(ms_since(t0));
      std::vector<fsdpc::Stage> stages = fsdpc::compile(trace, options);
      total_ms.push_back(ms_since(t0));
      statements = stages.back().traces[0].bsyms.size() + stages.back().traces[1].bsyms.size();
      pass_ms.clear();
      for (const fsdpc::Stage& s : stages) pass_ms.emplace_back(s.name, s.pass_ms);
    }
    std::sort(capture_ms.begin(), capture_ms.end());
    std::sort(total_ms.begin(), total_ms.end());
    double total = total_ms[total_ms.size() / 2];
    std::string passes;
    for (const auto& [name, ms] : pass_ms) {
      char item[64];
      std::snprintf(item, sizeof item, "%s\"%s\": %.2f", passes.empty() ? "" : ", ", name.c_str(), ms);
      passes += item;
    }
    std::printf("  {\"model\": \"%s\", \"layers\": %lld, \"final_statements\": %zu, \"capture_ms\": %.2f, "
                "\"pipeline_ms\": %.2f, \"ms_per_layer\": %.3f, \"pass_ms\": {%s}}%s\n",
                rows[i].label.c_str(), static_cast<long long>(rows[i].config.n_layer), statements,
                capture_ms[capture_ms.size() / 2], total, total / static_cast<double>(rows[i].config.n_layer),
                passes.c_str(), i + 1 < rows.size() ? "," : "");
  }
  std::printf("]}\n");
  return 0;
}
