// One allocator per device: accounts live and peak bytes per category and
// enforces an optional cap (`--mem-cap`), failing with a message that names
// the category and the sizes. Memory comes from the device's backend
// (executors/device_backend.h): 64-byte aligned host memory on the CPU,
// cudaMalloc on a GPU; freed blocks are cached by size on both.
//
// On a GPU, blocks are freed and handed out again in host order while
// kernels run later on the streams. That is safe because every kernel runs
// on the one compute stream in trace order and every collective first waits
// for the compute stream; the one unsafe case, freeing a block a collective
// still uses, is excluded by the stream plan (executors/cuda/stream_plan.h).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "executors/device_backend.h"
#include "executors/scratch_pool.h"
#include "ir/types.h"

namespace fsdpc {

enum class MemCategory : uint8_t { parameters, gradients, optimizer_state, activations, communication };
constexpr size_t kNumMemCategories = 5;
std::string_view mem_category_name(MemCategory c);

struct MemStats {
  std::array<int64_t, kNumMemCategories> live{};
  std::array<int64_t, kNumMemCategories> peak{};  // each category's own peak
  int64_t total_live = 0;
  int64_t total_peak = 0;  // peak of the sum, not the sum of peaks
};

class Allocator;

// A buffer owned by one allocator; returns its bytes to the accounting when
// the last reference goes away.
class Storage {
 public:
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();
  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  MemCategory category() const { return category_; }

 private:
  friend class Allocator;
  Storage(Allocator* owner, void* data, int64_t bytes, MemCategory category);
  Allocator* owner_;
  void* data_;
  int64_t bytes_;
  MemCategory category_;
};

// Also the kernels' scratch pool when the backend takes one
// (executors/scratch_pool.h): scratch is allocated and accounted like any
// other buffer.
class Allocator final : public ScratchPool {
 public:
  explicit Allocator(DeviceBackend& backend = cpu_backend(), std::optional<int64_t> cap_bytes = std::nullopt);
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;
  ~Allocator() override;

  // Uninitialised: every kernel writes its whole output (zero-filling half
  // a GiB of activations per step cost as much as the matmuls). Throws
  // fsdpc::Error when the cap would be exceeded.
  std::shared_ptr<Storage> allocate(int64_t bytes, MemCategory category);
  // Zero-filled (optimizer moments start at zero).
  std::shared_ptr<Storage> allocate_zeroed(int64_t bytes, MemCategory category);
  // Moves a buffer's bytes from its category to another (a gradient
  // produced as an activation and kept as the step's gradient).
  void recategorize(Storage& s, MemCategory to);

  const MemStats& stats() const { return stats_; }
  void reset_peaks();
  const Device& device() const { return device_; }
  DeviceBackend& backend() const { return backend_; }
  std::optional<int64_t> cap() const { return cap_; }
  // Live buffers; zero once every Storage has been released.
  int64_t live_buffers() const { return live_buffers_; }
  // Bytes held for reuse (freed buffers kept by size, as PyTorch's caching
  // allocator keeps them): a training step allocates the same sizes every
  // step, and fresh pages from the OS cost as much as the matmuls.
  int64_t cached_bytes() const { return cached_bytes_; }
  // Bytes taken from the backend and not returned: live blocks, rounded, plus the cache.
  int64_t reserved_bytes() const { return reserved_bytes_; }
  void release_cache();
  std::shared_ptr<void> scratch(size_t bytes, bool communication) override;

 private:
  friend class Storage;
  void release(Storage& s);
  size_t rounded(int64_t bytes) const;  // to the backend's alignment

  DeviceBackend& backend_;
  Device device_;
  std::optional<int64_t> cap_;
  MemStats stats_;
  int64_t live_buffers_ = 0;
  std::unordered_map<size_t, std::vector<void*>> cache_;  // rounded size -> free blocks
  int64_t cached_bytes_ = 0;
  int64_t reserved_bytes_ = 0;
};

// "12.0 MiB" for messages and logs.
std::string format_bytes(int64_t bytes);

}  // namespace fsdpc
