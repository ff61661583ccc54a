// Single-thread sgemm of the CPU executor (oneDNN through its matmul and
// linear kernels): GFLOP/s for square sizes and GPT-2-like shapes, as JSON on
// stdout. The peak that later CPU figures (a training step) are read against.
// A benchmark, not a test: it reports figures and asserts nothing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "executors/cpu/cpu_executor.h"

namespace {

using namespace fsdpc;
using Clock = std::chrono::steady_clock;

struct Case {
  std::string name;
  OpId op;              // matmul or linear
  Shape a, b, bias;     // bias empty: none
  int64_t batch, m, k, n;  // for the FLOP count
};

TensorType f32(Shape s) {
  TensorType t;
  t.shape = std::move(s);
  return t;
}

std::vector<float> random_floats(int64_t n) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Best of several timed runs after one warm-up run (which builds the cached
// primitive), repeated until about a second has passed.
double best_seconds(const Case& c) {
  const TensorType ta = f32(c.a), tb = f32(c.b), tbias = f32(c.bias);
  Shape out_shape = c.a;
  out_shape.back() = c.op == OpId::Linear ? c.b[0] : c.b.back();
  const TensorType tout = f32(out_shape);
  std::vector<float> a = random_floats(numel(c.a)), b = random_floats(numel(c.b));
  std::vector<float> bias = random_floats(numel(c.bias)), out(numel(out_shape));
  BoundSymbol bsym;
  bsym.op = c.op;
  std::vector<TensorView> in{{a.data(), &ta}, {b.data(), &tb}};
  if (!c.bias.empty()) in.push_back({bias.data(), &tbias});
  const std::vector<TensorView> outs{{out.data(), &tout}};
  KernelFn kernel = cpu_executor().kernel(c.op);
  KernelContext ctx;
  kernel(ctx, bsym, in, outs);
  double best = 1e30, total = 0.0;
  for (int rep = 0; rep < 20 && (rep < 3 || total < 1.0); ++rep) {
    const auto t0 = Clock::now();
    kernel(ctx, bsym, in, outs);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::min(best, s);
    total += s;
  }
  return best;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

std::vector<Case> cases() {
  std::vector<Case> cs;
  for (int64_t s : {256, 512, 1024, 1536, 2048})
    cs.push_back({"square " + std::to_string(s), OpId::Matmul, {s, s}, {s, s}, {}, 1, s, s, s});
  // GPT-2 small, batch 8 x seq 1024 = 8192 rows, d = 768, 12 heads of 64.
  const int64_t r = 8192, d = 768;
  cs.push_back({"gpt2 attn.c_attn", OpId::Matmul, {r, d}, {d, 3 * d}, {}, 1, r, d, 3 * d});
  cs.push_back({"gpt2 attn.c_proj", OpId::Matmul, {r, d}, {d, d}, {}, 1, r, d, d});
  cs.push_back({"gpt2 mlp.c_fc", OpId::Matmul, {r, d}, {d, 4 * d}, {}, 1, r, d, 4 * d});
  cs.push_back({"gpt2 mlp.c_proj", OpId::Matmul, {r, 4 * d}, {4 * d, d}, {}, 1, r, 4 * d, d});
  cs.push_back({"gpt2 mlp.c_fc weight grad", OpId::Matmul, {d, r}, {r, 4 * d}, {}, 1, d, r, 4 * d});
  cs.push_back({"linear+bias [8192,768]x[3072,768]^T", OpId::Linear, {r, d}, {4 * d, d}, {4 * d}, 1, r, d, 4 * d});
  cs.push_back({"lm_head linear [1024,768]x[50257,768]^T", OpId::Linear, {1024, d}, {50257, d}, {}, 1, 1024, d, 50257});
  cs.push_back({"attention q.k^T [96,1024,64]x[96,64,1024]", OpId::Matmul, {96, 1024, 64}, {96, 64, 1024}, {}, 96,
                1024, 64, 1024});
  cs.push_back({"attention p.v [96,1024,1024]x[96,1024,64]", OpId::Matmul, {96, 1024, 1024}, {96, 1024, 64}, {}, 96,
                1024, 1024, 64});
  return cs;
}

}  // namespace

int main() {
  std::printf("{\"benchmark\": \"sgemm\", \"cpu\": \"%s\", \"backend\": \"%s\", \"results\": [\n",
              cpu_model().c_str(), cpu_backend_info().c_str());
  const std::vector<Case> cs = cases();
  for (size_t i = 0; i < cs.size(); ++i) {
    const Case& c = cs[i];
    const double s = best_seconds(c);
    const double flop = 2.0 * static_cast<double>(c.batch * c.m) * static_cast<double>(c.k * c.n);
    std::printf("  {\"name\": \"%s\", \"op\": \"%s\", \"batch\": %lld, \"m\": %lld, \"k\": %lld, \"n\": %lld, "
                "\"ms\": %.3f, \"gflops\": %.1f}%s\n",
                c.name.c_str(), std::string(op_name(c.op)).c_str(), static_cast<long long>(c.batch),
                static_cast<long long>(c.m), static_cast<long long>(c.k), static_cast<long long>(c.n), s * 1e3,
                flop / s / 1e9, i + 1 < cs.size() ? "," : "");
    std::fflush(stdout);
  }
  std::printf("]}\n");
}
