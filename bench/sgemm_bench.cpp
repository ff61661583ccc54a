// Single-thread sgemm of the CPU executor (oneDNN through its matmul and
// linear kernels): GFLOP/s for square sizes and GPT-2-like shapes, in f32
// and in bf16 (f32 accumulation; widened to f32 where oneDNN has no bf16
// kernel, which "bf16_kernels" says), as JSON on stdout. The peaks that later
// CPU figures (a training step) are read against.
// A benchmark, not a test: it reports figures and asserts nothing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "executors/bf16.h"
#include "executors/cpu/cpu_executor.h"

namespace {

using namespace fsdpc;
using Clock = std::chrono::steady_clock;

struct Case {
  std::string name;
  OpId op;              // matmul or linear
  Shape a, b, bias;     // bias empty: none
  int64_t batch, m, k, n;  // for the FLOP count
  DType dtype = DType::f32;
};

TensorType typed(Shape s, DType d) {
  TensorType t;
  t.shape = std::move(s);
  t.dtype = d;
  return t;
}

// n random elements of dtype d (f32 or bf16) in 4-byte words.
std::vector<float> random_elements(int64_t n, DType d) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  if (d == DType::bf16) {
    auto* h = reinterpret_cast<uint16_t*>(v.data());
    for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(v[i]);  // the first n halves; v[i] is read before it is overwritten
  }
  return v;
}

// Best of several timed runs after one warm-up run (which builds the cached
// primitive), repeated until about a second has passed.
double best_seconds(const Case& c) {
  const TensorType ta = typed(c.a, c.dtype), tb = typed(c.b, c.dtype), tbias = typed(c.bias, c.dtype);
  Shape out_shape = c.a;
  out_shape.back() = c.op == OpId::Linear ? c.b[0] : c.b.back();
  const TensorType tout = typed(out_shape, c.dtype);
  std::vector<float> a = random_elements(numel(c.a), c.dtype), b = random_elements(numel(c.b), c.dtype);
  std::vector<float> bias = random_elements(numel(c.bias), c.dtype), out(numel(out_shape));
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
  // The same shapes in bf16: the peak --precision bf16 is read against.
  const size_t f32_cases = cs.size();
  for (size_t i = 0; i < f32_cases; ++i) {
    Case c = cs[i];
    c.dtype = DType::bf16;
    cs.push_back(std::move(c));
  }
  return cs;
}

}  // namespace

int main() {
  std::printf("{\"benchmark\": \"sgemm\", \"cpu\": \"%s\", \"backend\": \"%s\", \"bf16_kernels\": \"%s\", "
              "\"results\": [\n",
              cpu_model().c_str(), cpu_backend_info().c_str(), cpu_bf16_matmul_info().c_str());
  const std::vector<Case> cs = cases();
  for (size_t i = 0; i < cs.size(); ++i) {
    const Case& c = cs[i];
    const double s = best_seconds(c);
    const double flop = 2.0 * static_cast<double>(c.batch * c.m) * static_cast<double>(c.k * c.n);
    std::printf("  {\"name\": \"%s\", \"dtype\": \"%s\", \"op\": \"%s\", \"batch\": %lld, \"m\": %lld, \"k\": %lld, \"n\": %lld, "
                "\"ms\": %.3f, \"gflops\": %.1f}%s\n",
                c.name.c_str(), std::string(dtype_name(c.dtype)).c_str(), std::string(op_name(c.op)).c_str(), static_cast<long long>(c.batch),
                static_cast<long long>(c.m), static_cast<long long>(c.k), static_cast<long long>(c.n), s * 1e3,
                flop / s / 1e9, i + 1 < cs.size() ? "," : "");
    std::fflush(stdout);
  }
  std::printf("]}\n");
}
