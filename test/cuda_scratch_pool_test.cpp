// Kernel scratch through the accounting allocator (executors/scratch_pool.h,
// runtime/allocator.h), on a host-memory stand-in for the CUDA backend: the
// allocator attaches itself to a backend that takes scratch, accounts what
// it lends under activations or communication, enforces --mem-cap on it,
// frees its cache and retries when the device is full, and detaches before
// anything else in its destructor, so a backend holding scratch (NCCL
// staging of collectives never waited on) can drop it first.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <memory>
#include <vector>

#include "ir/error.h"
#include "runtime/allocator.h"

using namespace fsdpc;
using Catch::Contains;

namespace {

class ScratchDevice final : public DeviceBackend, public ScratchUser {
 public:
  explicit ScratchDevice(size_t capacity) : capacity_(capacity) {}
  ~ScratchDevice() override { CHECK(blocks_.empty()); }

  void use_scratch(ScratchPool* pool) override {
    held.clear();  // what the CUDA backend does on detach: drop every block it holds
    pool_ = pool;
    attaches.push_back(pool);
  }
  ScratchPool* pool() const { return pool_; }

  Device device() const override { return Device{DeviceKind::cuda, 0}; }
  size_t alignment() const override { return 256; }
  void* allocate(size_t bytes) override {
    if (used_ + bytes > capacity_) return nullptr;
    used_ += bytes;
    void* p = std::malloc(bytes);
    blocks_[p] = bytes;
    return p;
  }
  void deallocate(void* p) override {
    used_ -= blocks_.at(p);
    blocks_.erase(p);
    std::free(p);
  }
  void zero(void*, size_t) override {}
  void copy_from_host(void*, const void*, size_t) override {}
  void copy_to_host(void*, const void*, size_t) override {}
  void copy(void*, const void*, size_t) override {}
  void add_into(float*, const float*, int64_t) override {}
  void scale(float*, int64_t, float) override {}
  double sum_squares(const std::vector<Span>&) override { return 0; }
  void sgd_update(float*, const float*, float*, int64_t, const SgdStep&) override {}
  void adamw_update(float*, const float*, float*, float*, int64_t, const AdamwStep&) override {}
  void synchronize() override {}

  std::vector<ScratchPool*> attaches;
  std::vector<std::shared_ptr<void>> held;  // scratch kept across calls

 private:
  ScratchPool* pool_ = nullptr;
  size_t capacity_, used_ = 0;
  std::map<void*, size_t> blocks_;
};

size_t category(MemCategory c) { return static_cast<size_t>(c); }

}  // namespace

TEST_CASE("scratch pool: the allocator attaches to the backend and accounts what it lends", "[cuda][scratch]") {
  ScratchDevice dev(1 << 20);
  {
    Allocator alloc(dev);
    REQUIRE(dev.pool() == &alloc);
    {
      const std::shared_ptr<void> scores = dev.pool()->scratch(1000, false);
      const std::shared_ptr<void> staging = dev.pool()->scratch(3000, true);
      CHECK(scores.get() != nullptr);
      CHECK(staging.get() != scores.get());
      CHECK(alloc.stats().live[category(MemCategory::activations)] == 1000);
      CHECK(alloc.stats().live[category(MemCategory::communication)] == 3000);
      CHECK(alloc.live_buffers() == 2);
    }
    CHECK(alloc.stats().total_live == 0);
    CHECK(alloc.stats().total_peak == 4000);
    // Released blocks are handed out again in host order, from the cache.
    const int64_t cached = alloc.cached_bytes();
    const std::shared_ptr<void> again = dev.pool()->scratch(1000, false);
    CHECK(alloc.cached_bytes() == cached - 1024);
  }
  CHECK(dev.pool() == nullptr);  // detached on destruction
}

TEST_CASE("scratch pool: --mem-cap sees scratch, and a full device frees the cache and retries", "[cuda][scratch]") {
  ScratchDevice dev(4096);
  Allocator alloc(dev, 3000);
  const std::shared_ptr<void> a = dev.pool()->scratch(2000, false);
  CHECK_THROWS_WITH(dev.pool()->scratch(2000, true),
                    Contains("would exceed the") && Contains("communication") && Contains("activations 2.0 KiB"));
  { const std::shared_ptr<void> small = dev.pool()->scratch(512, false); }  // cached: 512 bytes
  { const std::shared_ptr<void> b = dev.pool()->scratch(768, false); }      // 2048 + 512 + 768 of 4096
  const std::shared_ptr<void> c = dev.pool()->scratch(900, false);  // needs the cache released
  CHECK(c.get() != nullptr);
  CHECK(alloc.cached_bytes() == 0);
}

TEST_CASE("scratch pool: the backend drops held scratch before the allocator checks for leaks", "[cuda][scratch]") {
  ScratchDevice dev(1 << 20);
  {
    Allocator alloc(dev);
    dev.held.push_back(dev.pool()->scratch(4096, true));  // a collective never waited on
    CHECK(alloc.live_buffers() == 1);
  }  // would fail "buffers outlive their allocator" were the backend told last
  CHECK(dev.held.empty());
  REQUIRE(dev.attaches.size() == 2);
  CHECK(dev.attaches[1] == nullptr);
}
