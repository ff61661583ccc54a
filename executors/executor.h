// The executor interface (docs/design.md "Executors"): a name, which bound
// symbols it claims, and a kernel per op. The claim pass (executors/claim.h)
// asks executors in priority order; the runtime calls the kernels.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "executors/scratch_pool.h"
#include "ir/trace.h"

namespace fsdpc {

// A tensor argument of a kernel: contiguous row-major data of `type` (the
// proxy's type; its shape is the local shape on this rank). Scalar-literal
// operands have data == nullptr; their value is in the bound symbol.
struct TensorView {
  void* data = nullptr;
  const TensorType* type = nullptr;
};

// State a kernel may need beyond its operands: collectives reach their
// communicators and pending requests through it. Compute kernels ignore it,
// except for `scratch_pool`.
class KernelContext {
 public:
  virtual ~KernelContext() = default;
  // The rank's allocator while the runtime runs a trace (the Interpreter
  // sets it): a kernel whose Executor::scratch_bytes is not 0 takes exactly
  // that scratch from it, so the memory plan counts it. nullptr outside the
  // runtime (kernel tests), where such a kernel uses its own buffers.
  ScratchPool* scratch_pool = nullptr;
};

// Computes `b`'s outputs (buffers already allocated by the runtime, sized by
// the output types) from its inputs. Throws fsdpc::Error on bad data (an
// index out of range), never aborts on user input.
using KernelFn = void (*)(KernelContext& ctx, const BoundSymbol& b, const std::vector<TensorView>& in,
                          const std::vector<TensorView>& out);

class Executor {
 public:
  virtual ~Executor() = default;
  // The prefix implementation symbols print with: cpu_linear, mpi_all_gather.
  virtual std::string_view name() const = 0;
  // True when this executor runs `b` as it is (a composite whole, or a prim).
  virtual bool claims(const BoundSymbol& b) const = 0;
  // The kernel of a claimed op.
  virtual KernelFn kernel(OpId op) const = 0;
  // The bytes of scratch the kernel of claimed `b` takes from
  // KernelContext::scratch_pool while it runs, for inputs of types `in` (nullptr
  // for a scalar literal): one block, after its outputs, freed before the
  // next statement. The memory plan (runtime/planner/memory_plan.h) adds it.
  virtual int64_t scratch_bytes(const BoundSymbol& b, const std::vector<const TensorType*>& in) const {
    (void)b;
    (void)in;
    return 0;
  }
};

}  // namespace fsdpc
