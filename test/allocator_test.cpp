// The host allocator: per-category live and peak bytes, release on last
// reference, and the cap's error message.
#include <catch2/catch.hpp>

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
  Allocator a(Device{}, 4096);
  auto p = a.allocate(3000, MemCategory::parameters);
  CHECK_THROWS_WITH(a.allocate(2000, MemCategory::activations),
                    Contains("out of memory on cpu") && Contains("allocating 2.0 KiB of activations") &&
                        Contains("4.0 KiB cap") && Contains("parameters 2.9 KiB"));
  CHECK(a.stats().total_live == 3000);  // nothing leaked by the failure
  CHECK_THROWS_WITH(Allocator(Device{}, 0), Contains("--mem-cap must be positive"));
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
