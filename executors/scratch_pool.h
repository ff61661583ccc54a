// Temporary device memory for kernels (attention scores, reduction
// partials, NCCL staging, the clipping norm's partials), taken from the
// rank's accounting allocator (runtime/allocator.h) so that --mem-cap and
// the memory statistics see it, and so that a device near capacity frees
// the allocator's cache and retries instead of failing beside it.
//
// A backend that wants scratch is a ScratchUser; the allocator built on it
// attaches itself and detaches (nullptr) first thing in its destructor, when
// the user must drop every block it still holds.
#pragma once

#include <cstddef>
#include <memory>

namespace fsdpc {

class ScratchPool {
 public:
  virtual ~ScratchPool() = default;
  // `bytes` of device memory, uninitialised, accounted as activations (or
  // communication) while the handle lives; throws fsdpc::Error past the cap.
  // Blocks are handed out in host order: a block released after enqueuing
  // work on the compute stream is safe to hand to later work on it.
  virtual std::shared_ptr<void> scratch(size_t bytes, bool communication) = 0;
};

class ScratchUser {
 public:
  virtual ~ScratchUser() = default;
  virtual void use_scratch(ScratchPool* pool) = 0;
};

}  // namespace fsdpc
