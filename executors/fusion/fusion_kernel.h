// The CPU fusion executor's kernel: runs a `fusion` statement (passes/fuse.h)
// as one compiled loop nest. Code is compiled on first use of a region
// signature and cached for the life of the process, so the same layer at
// every depth, and every later step, reuses it; with FSDPC_JIT_CACHE=DIR
// also on disk, for later processes (llvm_jit.h).
#pragma once

#include <cstdint>

#include "executors/executor.h"

namespace fsdpc::fusion {

void fusion_kernel(KernelContext& ctx, const BoundSymbol& b, const std::vector<TensorView>& in,
                   const std::vector<TensorView>& out);

// What the process-wide cache did so far (for benchmarks and tests).
struct JitCacheStats {
  int64_t compiled = 0;  // distinct signatures compiled (or loaded)
  int64_t from_disk = 0; // of those, loaded from FSDPC_JIT_CACHE
  int64_t hits = 0;      // runs that found their code compiled
  double compile_s = 0;  // wall time spent lowering, optimising and compiling
};
JitCacheStats jit_cache_stats();

// Compiles `b`'s region ahead of its first run (what the kernel would do).
void precompile(const BoundSymbol& b, const std::vector<TensorType>& input_types);

// Compiles every loop region of `traces` (CPU execution traces) not compiled
// yet, on all of the rank's threads (cpu_threads()) at once, so the engine
// pays the JIT before its first step on every core rather than region by
// region on one. Regions holding a matmul (passes/fold_transpose.h) are not
// loop nests and are skipped.
void precompile_regions(const std::vector<const Trace*>& traces);

}  // namespace fsdpc::fusion
