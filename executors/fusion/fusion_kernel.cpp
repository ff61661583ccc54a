// fusion_kernel(): describe the region, find or compile its code, and run its
// rows split evenly over the rank's threads (cpu_threads()), each thread a
// contiguous block of rows, so results do not depend on the thread count.
#include "executors/fusion/fusion_kernel.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "executors/cpu/cpu_executor.h"
#include "executors/fusion/llvm_jit.h"
#include "ir/error.h"

namespace fsdpc::fusion {

namespace {

// Below this many elements a region runs on the calling thread, as the CPU
// executor's own loops do (cpu_kernels.h's kParallelMin).
constexpr int64_t kParallelMin = int64_t{1} << 15;

struct Cache {
  std::mutex mu;
  std::unique_ptr<LlvmJit> jit;
  std::unordered_map<std::string, RegionFn> code;
  JitCacheStats stats;
};

Cache& cache() {
  static Cache c;
  return c;
}

RegionFn code_for(const Region& region) {
  const std::string key = region.signature();
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.code.find(key);
  if (it != c.code.end()) {
    ++c.stats.hits;
    return it->second;
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (!c.jit) {
    const char* dir = std::getenv("FSDPC_JIT_CACHE");
    c.jit = std::make_unique<LlvmJit>(dir ? dir : "");
  }
  RegionFn fn = c.jit->compile(region);
  c.stats.compile_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++c.stats.compiled;
  c.stats.from_disk = c.jit->disk_hits();
  c.code.emplace(key, fn);
  return fn;
}

std::vector<TensorType> types_of(const std::vector<TensorView>& in) {
  std::vector<TensorType> types;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i].type) fail("cpu_fusion: input ", i, " of a region is a scalar literal; literals stay inside");
    types.push_back(*in[i].type);
  }
  return types;
}

}  // namespace

void fusion_kernel(KernelContext&, const BoundSymbol& b, const std::vector<TensorView>& in,
                   const std::vector<TensorView>& out) {
  const Region region = describe_region(b, types_of(in));
  // A row of no elements still has its row values (an empty sum is 0).
  const int64_t rows = region.rows();
  if (rows == 0) return;
  const int64_t n = rows * std::max<int64_t>(region.cols(), 1);
  const RegionFn fn = code_for(region);
  std::vector<const void*> ins;
  for (const TensorView& v : in) ins.push_back(v.data);
  std::vector<void*> outs;
  for (const TensorView& v : out) outs.push_back(v.data);
  const int threads = n >= kParallelMin && rows > 1 ? static_cast<int>(std::min<int64_t>(cpu_threads(), rows)) : 1;
  if (threads == 1) return fn(ins.data(), outs.data(), 0, rows);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int t = 0; t < threads; ++t) fn(ins.data(), outs.data(), rows * t / threads, rows * (t + 1) / threads);
}

JitCacheStats jit_cache_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.stats;
}

void precompile(const BoundSymbol& b, const std::vector<TensorType>& input_types) {
  code_for(describe_region(b, input_types));
}

void precompile_regions(const std::vector<const Trace*>& traces) {
  std::vector<Region> regions;
  for (const Trace* t : traces) {
    std::unordered_map<std::string, TensorType> types;
    for (const Proxy& a : t->args) types[a.name] = a.type;
    for (const BoundSymbol& b : t->bsyms) {
      const bool loop = b.op == OpId::Fusion &&
                        std::none_of(b.subsymbols.begin(), b.subsymbols.end(), [](const BoundSymbol& s) {
                          return s.op == OpId::Matmul || s.op == OpId::Linear;
                        });
      if (loop) {
        std::vector<TensorType> in;
        for (const Operand& x : b.inputs) in.push_back(types.at(x.name));
        regions.push_back(describe_region(b, in));
      }
      for (const Proxy& p : b.outputs) types[p.name] = p.type;
    }
  }
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  std::vector<Region> todo;
  std::unordered_set<std::string> seen;
  for (Region& r : regions) {
    std::string key = r.signature();
    if (!c.code.count(key) && seen.insert(key).second) todo.push_back(std::move(r));
  }
  if (todo.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  if (!c.jit) {
    const char* dir = std::getenv("FSDPC_JIT_CACHE");
    c.jit = std::make_unique<LlvmJit>(dir ? dir : "");
  }
  const std::vector<RegionFn> fns = c.jit->compile_all(todo, cpu_threads());
  c.stats.compile_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  c.stats.compiled += static_cast<int64_t>(todo.size());
  c.stats.from_disk = c.jit->disk_hits();
  for (size_t i = 0; i < todo.size(); ++i) c.code.emplace(todo[i].signature(), fns[i]);
}

}  // namespace fsdpc::fusion
