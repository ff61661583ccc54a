// The interpreter: runs a claimed execution trace on this rank. It owns the
// values by name, allocates each output from the device allocator (futures
// and their waits in the communication category, everything else as
// activations), frees what `del` names, and lets pending collectives
// progress between kernels, so measured memory follows the trace.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "executors/executor.h"
#include "ir/trace.h"
#include "runtime/allocator.h"

namespace fsdpc {

class Profiler;

// A tensor the runtime holds: a typed view of (all of) a storage.
struct TensorValue {
  std::shared_ptr<Storage> storage;
  TensorType type;
  void* data() const { return storage ? storage->data() : nullptr; }
};

// Allocates an uninitialised tensor of `type`.
TensorValue allocate_tensor(Allocator& allocator, const TensorType& type, MemCategory category);

class Interpreter {
 public:
  // `progress` runs between statements (the MPI executor's polling).
  Interpreter(Allocator& allocator, std::vector<const Executor*> executors, KernelContext& context,
              std::function<void()> progress = {});

  // Runs `trace` (claimed: every statement but del has an executor) on
  // `args`, given in trace.args order with matching shapes and dtypes.
  // Returns the returned values, the return tree flattened left to right.
  std::vector<TensorValue> run(const Trace& trace, std::vector<TensorValue> args);

  // Where the time went, accumulated over every run() (for benchmarks):
  // compute kernels, issuing collectives, and blocked in waits (the
  // communication not hidden behind compute).
  struct Timing {
    double compute_s = 0, issue_s = 0, wait_s = 0;
  };
  const Timing& timing() const { return timing_; }
  void reset_timing() { timing_ = {}; }
  // Records every kernel and the live memory after each statement on
  // `profiler` (not owned) until reset to null; null costs one branch.
  void set_profiler(Profiler* profiler) { profiler_ = profiler; }

 private:
  KernelFn kernel_for(const BoundSymbol& b) const;

  Allocator& allocator_;
  std::vector<const Executor*> executors_;
  KernelContext& context_;
  std::function<void()> progress_;
  Timing timing_;
  Profiler* profiler_ = nullptr;
};

}  // namespace fsdpc
