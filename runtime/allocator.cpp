// Byte accounting by category, the cap, and the cache of freed blocks.
#include "runtime/allocator.h"

#include <cstdio>

#include "ir/error.h"

namespace fsdpc {

namespace {
constexpr std::array<std::string_view, kNumMemCategories> kNames = {
    "parameters", "gradients", "optimizer_state", "activations", "communication"};
}  // namespace

std::string_view mem_category_name(MemCategory c) { return kNames[static_cast<size_t>(c)]; }

std::string format_bytes(int64_t bytes) {
  char buf[32];
  double b = static_cast<double>(bytes);
  if (bytes < 1024) std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else if (b < 1024.0 * 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
  else if (b < 1024.0 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024 * 1024));
  else std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  return buf;
}

Storage::Storage(Allocator* owner, void* data, int64_t bytes, MemCategory category)
    : owner_(owner), data_(data), bytes_(bytes), category_(category) {}

Storage::~Storage() { owner_->release(*this); }

Allocator::Allocator(DeviceBackend& backend, std::optional<int64_t> cap_bytes)
    : backend_(backend), device_(backend.device()), cap_(cap_bytes) {
  if (cap_ && *cap_ <= 0) fail("--mem-cap must be positive, got ", *cap_, " bytes");
  if (auto* user = dynamic_cast<ScratchUser*>(&backend_)) user->use_scratch(this);
}

size_t Allocator::rounded(int64_t bytes) const {
  const size_t a = backend_.alignment();
  return (static_cast<size_t>(bytes) + a - 1) / a * a;
}

Allocator::~Allocator() {
  // First: the backend drops the scratch it holds (NCCL staging of
  // collectives never waited on) and quiesces its device before any free.
  if (auto* user = dynamic_cast<ScratchUser*>(&backend_)) user->use_scratch(nullptr);
  FSDPC_CHECK(live_buffers_ == 0) << live_buffers_ << " buffers outlive their allocator";
  release_cache();
}

void Allocator::release_cache() {
  for (auto& [size, blocks] : cache_)
    for (void* p : blocks) {
      backend_.deallocate(p);
      reserved_bytes_ -= static_cast<int64_t>(size);
    }
  cache_.clear();
  cached_bytes_ = 0;
}

std::shared_ptr<Storage> Allocator::allocate(int64_t bytes, MemCategory category) {
  FSDPC_CHECK(bytes >= 0) << "negative allocation";
  if (cap_ && stats_.total_live + bytes > *cap_) {
    std::string live;
    for (size_t i = 0; i < kNumMemCategories; ++i)
      if (stats_.live[i])
        live += (live.empty() ? "" : ", ") + std::string(kNames[i]) + " " + format_bytes(stats_.live[i]);
    fail("out of memory on ", device_name(device_), ": allocating ", format_bytes(bytes), " of ",
         mem_category_name(category), " would exceed the ", format_bytes(*cap_), " cap (live: ",
         live.empty() ? "nothing" : live, ")");
  }
  const size_t size = rounded(bytes);
  void* data = nullptr;
  bool cached = false;
  if (auto it = cache_.find(size); it != cache_.end() && !it->second.empty()) {
    cached = true;
    data = it->second.back();
    it->second.pop_back();
    cached_bytes_ -= static_cast<int64_t>(size);
  } else if (size) {
    data = backend_.allocate(size);
    if (!data && cached_bytes_) {  // blocks of other sizes may make room
      release_cache();
      data = backend_.allocate(size);
    }
  }
  if (size && !data)
    fail("out of memory on ", device_name(device_), " allocating ", format_bytes(bytes), " of ",
         mem_category_name(category));
  if (size && !cached) reserved_bytes_ += static_cast<int64_t>(size);
  size_t c = static_cast<size_t>(category);
  stats_.live[c] += bytes;
  stats_.peak[c] = std::max(stats_.peak[c], stats_.live[c]);
  stats_.total_live += bytes;
  stats_.total_peak = std::max(stats_.total_peak, stats_.total_live);
  ++live_buffers_;
  return std::shared_ptr<Storage>(new Storage(this, data, bytes, category));
}

std::shared_ptr<Storage> Allocator::allocate_zeroed(int64_t bytes, MemCategory category) {
  std::shared_ptr<Storage> s = allocate(bytes, category);
  if (bytes) backend_.zero(s->data(), static_cast<size_t>(bytes));
  return s;
}

std::shared_ptr<void> Allocator::scratch(size_t bytes, bool communication) {
  std::shared_ptr<Storage> s =
      allocate(static_cast<int64_t>(bytes), communication ? MemCategory::communication : MemCategory::activations);
  void* data = s->data();
  return std::shared_ptr<void>(std::move(s), data);  // aliasing: the handle owns the Storage
}

void Allocator::recategorize(Storage& s, MemCategory to) {
  FSDPC_CHECK(s.owner_ == this) << "storage from another allocator";
  size_t from = static_cast<size_t>(s.category_), c = static_cast<size_t>(to);
  stats_.live[from] -= s.bytes_;
  stats_.live[c] += s.bytes_;
  stats_.peak[c] = std::max(stats_.peak[c], stats_.live[c]);
  s.category_ = to;
}

void Allocator::release(Storage& s) {
  if (s.data_) {
    const size_t size = rounded(s.bytes_);
    cache_[size].push_back(s.data_);
    cached_bytes_ += static_cast<int64_t>(size);
  }
  stats_.live[static_cast<size_t>(s.category_)] -= s.bytes_;
  stats_.total_live -= s.bytes_;
  --live_buffers_;
}

void Allocator::reset_peaks() {
  stats_.peak = stats_.live;
  stats_.total_peak = stats_.total_live;
}

}  // namespace fsdpc
