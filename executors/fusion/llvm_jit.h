// The CPU fusion executor's code generator: lowers a Region (region.h) to
// LLVM IR through the LLVM C++ API, optimises it at -O3 for the host CPU and
// its features (loop vectoriser on, glibc's libmvec for exp/log/pow), and
// compiles it to an object that ORC's LLJIT links into the process. LLVM
// stays behind this header (pimpl): only llvm_jit.cpp includes it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "executors/fusion/region.h"

namespace fsdpc::fusion {

// Runs rows [row_begin, row_end) of the region: a row is the innermost
// dimension (one element for a 0-d region). ins[k] is the data of the
// fusion statement's input k, outs[m] of its output m.
using RegionFn = void (*)(const void* const* ins, void* const* outs, int64_t row_begin, int64_t row_end);

class LlvmJit {
 public:
  // With `cache_dir` set, compiled objects are also kept there (one .o and
  // its .key per region: the signature, LLVM version and host CPU), and a
  // region found there is loaded instead of compiled: FSDPC_JIT_CACHE.
  explicit LlvmJit(const std::string& cache_dir = {});
  ~LlvmJit();
  LlvmJit(const LlvmJit&) = delete;
  LlvmJit& operator=(const LlvmJit&) = delete;

  // Compiles `region` as a new function; not thread-safe (the cache locks).
  RegionFn compile(const Region& region);

  // Compiles every region not compiled yet, up to `threads` at once (each
  // worker its own LLVM context and target machine: lowering, optimising and
  // emitting are independent per region), then links them in order; returns
  // each region's code. Not thread-safe, like compile().
  std::vector<RegionFn> compile_all(const std::vector<Region>& regions, int threads);

  // The textual LLVM IR of `region` before and after optimisation, for
  // tests (is the row loop vectorised?) and debugging.
  std::string unoptimized_ir(const Region& region);
  std::string optimized_ir(const Region& region);

  // Regions loaded from the disk cache rather than compiled.
  int64_t disk_hits() const;

 private:
  std::string ir_text(const Region& region, bool optimized);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fsdpc::fusion
