// The caching allocator: per-category live and peak bytes, release on last
// reference, the cap's error message, and its use of a device backend (a
// fake one here, standing in for cudaMalloc: what it asks the device for,
// when it gives blocks back, and what it does when the device is full).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>

#include "ir/error.h"
#include "runtime/allocator.h"

using namespace fsdpc;
using Catch::Contains;

TEST_CASE("live and peak bytes are accounted per category", "[allocator]") {
  Allocator a;
  auto p = a.allocate(1000, MemCategory::parameters);
  {
    auto act = a.allocate(500, MemCategory::activations);
    auto act2 = a.allocate(300, MemCategory::activations);
    CHECK(a.stats().live[3] == 800);
    CHECK(a.stats().total_live == 1800);
    CHECK(reinterpret_cast<uintptr_t>(act->data()) % 64 == 0);
  }
  CHECK(a.stats().live[3] == 0);
  CHECK(a.stats().peak[3] == 800);
  CHECK(a.stats().total_peak == 1800);
  CHECK(a.stats().total_live == 1000);
  auto g = a.allocate(200, MemCategory::activations);
  a.recategorize(*g, MemCategory::gradients);
  CHECK(a.stats().live[1] == 200);
  CHECK(a.stats().live[3] == 0);
  a.reset_peaks();
  CHECK(a.stats().total_peak == 1200);
  CHECK(a.live_buffers() == 2);
  auto empty = a.allocate(0, MemCategory::communication);
  CHECK(empty->bytes() == 0);
}

TEST_CASE("the cap fails with the category and the sizes", "[allocator]") {
  Allocator a(cpu_backend(), 4096);
  auto p = a.allocate(3000, MemCategory::parameters);
  CHECK_THROWS_WITH(a.allocate(2000, MemCategory::activations),
                    Contains("out of memory on cpu") && Contains("allocating 2.0 KiB of activations") &&
                        Contains("4.0 KiB cap") && Contains("parameters 2.9 KiB"));
  CHECK(a.stats().total_live == 3000);  // nothing leaked by the failure
  CHECK_THROWS_WITH(Allocator(cpu_backend(), 0), Contains("--mem-cap must be positive"));
}

TEST_CASE("freed buffers are reused by size, and zeroed buffers are zero", "[allocator]") {
  Allocator a;
  void* first = nullptr;
  {
    auto s = a.allocate(1000, MemCategory::activations);
    first = s->data();
  }
  CHECK(a.cached_bytes() == 1024);  // rounded to the 64-byte alignment
  CHECK(a.stats().total_live == 0);
  auto again = a.allocate(1000, MemCategory::gradients);
  CHECK(again->data() == first);
  CHECK(a.cached_bytes() == 0);
  static_cast<unsigned char*>(again->data())[7] = 42;
  again.reset();
  auto z = a.allocate_zeroed(1000, MemCategory::optimizer_state);
  CHECK(z->data() == first);
  CHECK(static_cast<unsigned char*>(z->data())[7] == 0);
  z.reset();
  a.release_cache();
  CHECK(a.cached_bytes() == 0);
}

namespace {

// Device memory that runs out after `capacity` bytes; records every call.
class FakeDevice final : public DeviceBackend {
 public:
  explicit FakeDevice(size_t capacity) : capacity_(capacity) {}
  ~FakeDevice() override { CHECK(blocks_.empty()); }
  Device device() const override { return Device{DeviceKind::cuda, 3}; }
  size_t alignment() const override { return 256; }
  void* allocate(size_t bytes) override {
    ++allocations;
    if (used_ + bytes > capacity_) return nullptr;
    used_ += bytes;
    void* p = std::malloc(bytes);
    blocks_[p] = bytes;
    return p;
  }
  void deallocate(void* p) override {
    ++frees;
    used_ -= blocks_.at(p);
    blocks_.erase(p);
    std::free(p);
  }
  void zero(void*, size_t) override { ++zeroes; }
  void copy_from_host(void*, const void*, size_t) override {}
  void copy_to_host(void*, const void*, size_t) override {}
  void copy(void*, const void*, size_t) override {}
  void add_into(float*, const float*, int64_t) override {}
  void scale(float*, int64_t, float) override {}
  double sum_squares(const std::vector<Span>&) override { return 0; }
  void sgd_update(float*, const float*, float*, int64_t, const SgdStep&) override {}
  void adamw_update(float*, const float*, float*, float*, int64_t, const AdamwStep&) override {}
  void synchronize() override {}
  int allocations = 0, frees = 0, zeroes = 0;

 private:
  size_t capacity_, used_ = 0;
  std::map<void*, size_t> blocks_;
};

}  // namespace

TEST_CASE("a device allocator rounds to the device's alignment and caches its blocks", "[allocator]") {
  FakeDevice dev(1 << 20);
  {
    Allocator a(dev);
    CHECK(a.device() == Device{DeviceKind::cuda, 3});
    { auto s = a.allocate(1000, MemCategory::activations); }
    CHECK(a.cached_bytes() == 1024);  // 4 x 256
    auto again = a.allocate(900, MemCategory::activations);  // same rounded size: no device call
    CHECK(dev.allocations == 1);
    auto z = a.allocate_zeroed(100, MemCategory::optimizer_state);  // zeroed on the device
    CHECK(dev.zeroes == 1);
    CHECK(dev.allocations == 2);
    CHECK(dev.frees == 0);  // freed blocks stay cached while the allocator lives
  }
  CHECK(dev.frees == 2);  // the destructor returns every cached block
}

TEST_CASE("a full device first gets the cache back, then fails naming the device", "[allocator]") {
  FakeDevice dev(4096);
  Allocator a(dev);
  { auto small = a.allocate(3000, MemCategory::activations); }  // 3072 cached, the device nearly full
  auto big = a.allocate(2000, MemCategory::gradients);  // needs the cache released to fit
  CHECK(dev.frees == 1);
  CHECK(a.cached_bytes() == 0);
  CHECK_THROWS_WITH(a.allocate(3000, MemCategory::parameters),
                    Contains("out of memory on cuda:3") && Contains("of parameters"));
  CHECK(a.stats().total_live == 2000);
}
