// The memory plan's model of the accounting allocator (runtime/allocator.h):
// the same bytes, categories and cache of rounded blocks, without memory,
// and the kernels' scratch (Executor::scratch_bytes) of the executors a
// target runs with. Private to runtime/planner/memory_plan.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "executors/claim.h"
#include "ir/error.h"
#include "runtime/planner/memory_plan.h"

namespace fsdpc::planner_detail {

// Allocator's accounting and cache, without memory: blocks are shared by
// reference count as Storage is by shared_ptr.
class AllocatorModel {
 public:
  AllocatorModel(size_t alignment, Target target) : alignment_(alignment), executors_(executors_for(target)) {}

  // The scratch the kernel of `b` takes from the allocator while it runs
  // (Executor::scratch_bytes; `in`: its inputs' types, nullptr for a literal).
  int64_t scratch_of(const BoundSymbol& b, const std::vector<const TensorType*>& in) const {
    for (const Executor* e : executors_)
      if (e->name() == b.executor) return e->scratch_bytes(b, in);
    return 0;
  }

  int allocate(int64_t bytes, MemCategory c) {
    const size_t size = (static_cast<size_t>(bytes) + alignment_ - 1) / alignment_ * alignment_;
    if (size) {  // Allocator::allocate: a cached block of the same rounded size, else a new one
      auto it = cache_.find(size);
      if (it != cache_.end() && it->second > 0) --it->second;
      else reserved_ += static_cast<int64_t>(size);
    }
    blocks_.push_back({bytes, size, c, 1});
    live_[static_cast<size_t>(c)] += bytes;
    total_ += bytes;
    return static_cast<int>(blocks_.size() - 1);
  }
  void hold(int id) { ++blocks_.at(static_cast<size_t>(id)).refs; }
  void drop(int id) {
    Block& b = blocks_.at(static_cast<size_t>(id));
    FSDPC_CHECK(b.refs > 0) << "memory plan: block " << id << " released twice";
    if (--b.refs > 0) return;
    if (b.size) ++cache_[b.size];  // Allocator::release keeps the block
    live_[static_cast<size_t>(b.category)] -= b.bytes;
    total_ -= b.bytes;
  }
  void recategorize(int id, MemCategory to) {
    Block& b = blocks_.at(static_cast<size_t>(id));
    live_[static_cast<size_t>(b.category)] -= b.bytes;
    live_[static_cast<size_t>(to)] += b.bytes;
    b.category = to;
  }
  const MemBytes& live() const { return live_; }
  int64_t total() const { return total_; }
  int64_t reserved() const { return reserved_; }

 private:
  struct Block {
    int64_t bytes;
    size_t size;  // rounded
    MemCategory category;
    int refs;
  };
  size_t alignment_;
  std::vector<const Executor*> executors_;
  std::vector<Block> blocks_;
  MemBytes live_{};
  int64_t total_ = 0;
  std::map<size_t, int64_t> cache_;  // rounded size -> free blocks
  int64_t reserved_ = 0;
};

}  // namespace fsdpc::planner_detail
