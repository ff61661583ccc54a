// strided_copy: the one data-movement loop behind permute, broadcast_in_dim,
// slice, pad and cat. Dims are coalesced so contiguous stretches become one
// memcpy and broadcasts one fill; a transpose of the two innermost dims is
// copied in tiles so neither side is walked a cache line per element.
#include <algorithm>
#include <cstring>

#include "executors/cpu/cpu_kernels.h"

namespace fsdpc::cpu {

namespace {

constexpr int64_t kTile = 32;

std::vector<Dim> coalesce(const Shape& shape, const Strides& ss, const Strides& ds) {
  std::vector<Dim> dims;
  for (size_t i = 0; i < shape.size(); ++i) push_coalesced(dims, Dim{shape[i], ss[i], ds[i]});
  return dims;
}

// dst[i*a.dst + j] = src[i + j*b.src]: the innermost two dims swapped.
template <class T>
void transpose_tiles(const T* src, T* dst, const Dim& a, const Dim& b) {
  for (int64_t i0 = 0; i0 < a.size; i0 += kTile)
    for (int64_t j0 = 0; j0 < b.size; j0 += kTile) {
      const int64_t i1 = std::min(a.size, i0 + kTile), j1 = std::min(b.size, j0 + kTile);
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) dst[i * a.dst + j] = src[i + j * b.src];
    }
}

// One innermost run of copy_dims: a memcpy, a fill, or a strided loop.
template <class T>
void copy_run(const T* p, T* q, const Dim& last) {
  if (last.src == 1 && last.dst == 1)
    std::memcpy(q, p, last.size * sizeof(T));
  else if (last.src == 0 && last.dst == 1)
    std::fill(q, q + last.size, *p);
  else
    for (int64_t i = 0; i < last.size; ++i) q[i * last.dst] = p[i * last.src];
}

// Every element is written once from one source element, so splitting the
// outermost dim (or one long run) over the rank's threads changes nothing
// but the time.
template <class T>
void copy_dims(const T* src, T* dst, const std::vector<Dim>& dims) {
  if (dims.empty()) {
    dst[0] = src[0];
    return;
  }
  const size_t r = dims.size();
  const Dim last = dims.back();
  const bool tiled = r >= 2 && last.dst == 1 && last.src != 1 && dims[r - 2].src == 1;
  auto inner = [&](int64_t s, int64_t o) {
    if (tiled)
      transpose_tiles(src + s, dst + o, dims[r - 2], last);
    else
      copy_run(src + s, dst + o, last);
  };
  const size_t outer = tiled ? r - 2 : r - 1;
  int64_t total = 1;
  for (const Dim& d : dims) total *= d.size;
  const int threads = cpu_threads();
  if (total < kParallelMin || threads == 1) return for_each_outer(dims, outer, inner);
  if (outer >= 1) {
    const Dim first = dims.front();
    const std::vector<Dim> rest(dims.begin() + 1, dims.end());
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < first.size; ++i)
      for_each_outer(rest, outer - 1, [&](int64_t s, int64_t o) { inner(s + i * first.src, o + i * first.dst); });
    return;
  }
  if (tiled) return inner(0, 0);
  // One long run: equal pieces of it.
  const int64_t chunk = (last.size + threads - 1) / threads;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int t = 0; t < threads; ++t) {
    const int64_t lo = std::min(last.size, t * chunk), hi = std::min(last.size, lo + chunk);
    if (lo < hi) copy_run(src + lo * last.src, dst + lo * last.dst, Dim{hi - lo, last.src, last.dst});
  }
}

}  // namespace

int64_t prod(const Shape& shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= shape[i];
  return p;
}

void strided_copy(const void* src, const Strides& ss, void* dst, const Strides& ds, const Shape& shape,
                  int64_t elem_size) {
  if (numel(shape) == 0) return;
  const std::vector<Dim> dims = coalesce(shape, ss, ds);
  switch (elem_size) {
    case 1: return copy_dims(static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), dims);
    case 2: return copy_dims(static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), dims);
    case 4: return copy_dims(static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), dims);
    case 8: return copy_dims(static_cast<const uint64_t*>(src), static_cast<uint64_t*>(dst), dims);
    default: break;
  }
  FSDPC_CHECK(false) << "strided_copy of " << elem_size << "-byte elements";
}

}  // namespace fsdpc::cpu
