// The executor both communication backends are (MPI on CPU tensors, NCCL on
// CUDA ones): the same ops, the same claim rule and the op -> kernel map,
// written once. A backend brings its name, its device, its kernels and the
// dtypes it moves and reduces.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "executors/executor.h"

namespace fsdpc {

// A communication op and the backend's kernel for it. Each collective starts
// its transfer and returns; `wait` completes it.
struct CollectiveKernel {
  OpId op;
  KernelFn kernel;
};

struct CollectiveBackend {
  std::string_view name;
  DeviceKind device;
  std::vector<CollectiveKernel> kernels;  // the ops it runs
  bool (*moves)(DType);    // may carry a tensor of this dtype
  bool (*reduces)(DType);  // may sum (or max) a tensor of this dtype
};

class CollectiveExecutor final : public Executor {
 public:
  explicit CollectiveExecutor(CollectiveBackend backend) : backend_(std::move(backend)) {}

  std::string_view name() const override { return backend_.name; }

  // A communication op with one output on the backend's device, of a dtype it
  // moves; a reduction only as sum (or max, for all_reduce) of a dtype it
  // reduces.
  bool claims(const BoundSymbol& b) const override;

  KernelFn kernel(OpId op) const override;

 private:
  KernelFn kernel_or_null(OpId op) const;

  CollectiveBackend backend_;
};

}  // namespace fsdpc
