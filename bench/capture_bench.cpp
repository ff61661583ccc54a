// Capture speed of the built-in models: median wall time of capture (record,
// shape-check, decompose, verify) and of printing, as JSON on stdout.
// A benchmark, not a test: it reports figures and asserts nothing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "frontend/models/registry.h"
#include "ir/printer.h"

namespace {
using Clock = std::chrono::steady_clock;

template <class F>
double median_ms(int reps, F&& f) {
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

size_t count_bsyms(const std::vector<fsdpc::BoundSymbol>& bsyms) {
  size_t n = 0;
  fsdpc::for_each_bsym(bsyms, [&](const fsdpc::BoundSymbol&) { ++n; });
  return n;
}
}  // namespace

int main(int argc, char** argv) {
  int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  std::vector<std::string> models = {"mlp", "gpt2-tiny", "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"};
  std::printf("{\"benchmark\": \"capture\", \"reps\": %d, \"results\": [\n", reps);
  for (size_t i = 0; i < models.size(); ++i) {
    auto model = fsdpc::make_model(models[i]);
    fsdpc::Trace trace;
    double capture_ms = median_ms(reps, [&] { trace = fsdpc::capture(*model); });
    std::string text;
    double print_ms = median_ms(reps, [&] { text = fsdpc::print_trace(trace); });
    std::printf("  {\"model\": \"%s\", \"statements\": %zu, \"with_subsymbols\": %zu, "
                "\"capture_ms\": %.3f, \"print_ms\": %.3f, \"text_bytes\": %zu}%s\n",
                models[i].c_str(), trace.bsyms.size(), count_bsyms(trace.bsyms), capture_ms, print_ms,
                text.size(), i + 1 < models.size() ? "," : "");
  }
  std::printf("]}\n");
  return 0;
}
