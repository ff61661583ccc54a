// Host-side plans of the CUDA data-movement ops (copy_plan.h): strides,
// coalescing, bounds checks and widening, in plain C++.
#include "executors/cuda/copy_plan.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <span>
#include <string>

#include "ir/error.h"

namespace fsdpc::cuda {

namespace {

using Dim = StridedDim;  // coalesced by the CPU's rule (executors/strided.h)

int widest_unit_of(std::span<const uint64_t> values) {
  for (int w : {16, 8, 4, 2}) {
    bool all = true;
    for (uint64_t v : values) all = all && v % static_cast<uint64_t>(w) == 0;
    if (all) return w;
  }
  return 1;
}

// Fails unless the plan stays inside a source of src_count and a
// destination of dst_count elements.
void check_inside(std::string_view op, const CopyPlan& plan, int64_t src_count, int64_t dst_count) {
  const auto [src_end, dst_end] = plan_extent(plan);
  if (src_end > src_count)
    fail(op, ": the copy would read element ", src_end - 1, " of an input of ", src_count, " elements");
  if (dst_end > dst_count)
    fail(op, ": the copy would write element ", dst_end - 1, " of an output of ", dst_count, " elements");
}

void check_rank(std::string_view op, const char* what, size_t got, size_t rank) {
  if (got != rank) fail(op, ": ", what, " has ", got, " entries for a rank-", rank, " tensor");
}

// Shape-style text of an attribute list, "[1, 0]".
std::string list_str(const IntList& l) { return shape_str(l); }

template <class T>
uint64_t bits_of(T v) {
  static_assert(sizeof(T) <= sizeof(uint64_t));
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));  // little-endian: the low bytes
  return bits;
}

// Toward zero, saturating at the range and NaN to 0, as launch_convert
// does on the device (a plain cast of an out-of-range value is undefined).
template <class I>
I saturating_int(double v) {
  if (!(v == v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (v >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

}  // namespace

bool CopyPlan::contiguous() const {
  if (pieces.size() != 1) return false;
  const CopyDesc& d = pieces[0].desc;
  return d.rank == 0 || (d.rank == 1 && d.src[0] == 1 && d.dst[0] == 1);
}

CopyPlan plan_copy(const Shape& shape, const Strides& ss, const Strides& ds, int64_t src_offset,
                   int64_t dst_offset) {
  FSDPC_CHECK(ss.size() == shape.size() && ds.size() == shape.size())
      << "strides of rank " << ss.size() << "/" << ds.size() << " for shape " << shape_str(shape);
  CopyPlan plan;
  plan.count = numel(shape);
  if (plan.count == 0) return plan;
  std::vector<Dim> dims;
  for (size_t i = 0; i < shape.size(); ++i) {
    FSDPC_CHECK(ss[i] >= 0 && ds[i] >= 0) << "negative stride in a copy plan";
    push_coalesced(dims, Dim{shape[i], ss[i], ds[i]});
  }
  // The innermost kMaxCopyDims dims go to the kernel; any outer ones are
  // walked here, one launch per index (only tensors of rank > 8 whose dims
  // do not merge get there).
  const int64_t outer = std::max<int64_t>(static_cast<int64_t>(dims.size()) - kMaxCopyDims, 0);
  CopyDesc inner;
  inner.rank = static_cast<int32_t>(static_cast<int64_t>(dims.size()) - outer);
  for (int32_t k = 0; k < inner.rank; ++k) {
    const Dim& d = dims[outer + k];
    inner.size[k] = d.size;
    inner.src[k] = d.src;
    inner.dst[k] = d.dst;
  }
  std::vector<int64_t> index(outer, 0);
  int64_t s = src_offset, o = dst_offset;
  while (true) {
    plan.pieces.push_back(CopyPiece{s, o, inner});
    int64_t k = outer - 1;
    for (; k >= 0; --k) {
      s += dims[k].src;
      o += dims[k].dst;
      if (++index[k] < dims[k].size) break;
      s -= dims[k].src * dims[k].size;
      o -= dims[k].dst * dims[k].size;
      index[k] = 0;
    }
    if (k < 0) return plan;
  }
}

std::pair<int64_t, int64_t> plan_extent(const CopyPlan& plan) {
  int64_t src_end = 0, dst_end = 0;
  for (const CopyPiece& p : plan.pieces) {
    int64_t s = p.src_offset, o = p.dst_offset;
    for (int32_t k = 0; k < p.desc.rank; ++k) {
      s += (p.desc.size[k] - 1) * p.desc.src[k];
      o += (p.desc.size[k] - 1) * p.desc.dst[k];
    }
    src_end = std::max(src_end, s + 1);
    dst_end = std::max(dst_end, o + 1);
  }
  return {src_end, dst_end};
}

CopyPlan plan_permute(std::string_view op, const Shape& in, const Shape& out, const IntList& dims) {
  check_rank(op, "dims", dims.size(), in.size());
  check_rank(op, "the output shape", out.size(), in.size());
  std::vector<bool> seen(in.size(), false);
  Strides src(in.size());
  const Strides xs = row_major_strides(in);
  for (size_t k = 0; k < dims.size(); ++k) {
    const int64_t d = dims[k];
    if (d < 0 || d >= static_cast<int64_t>(in.size()) || seen[d])
      fail(op, ": dims ", list_str(dims), " is not a permutation of the dims of ", shape_str(in));
    if (out[k] != in[d])
      fail(op, ": dims ", list_str(dims), " turn ", shape_str(in), " into another shape than the output ",
           shape_str(out));
    seen[d] = true;
    src[k] = xs[d];
  }
  CopyPlan plan = plan_copy(out, src, row_major_strides(out));
  check_inside(op, plan, numel(in), numel(out));
  return plan;
}

CopyPlan plan_broadcast(std::string_view op, const Shape& in, const Shape& out, const IntList& broadcast_dims) {
  check_rank(op, "broadcast_dims", broadcast_dims.size(), in.size());
  const Strides xs = row_major_strides(in);
  Strides src(out.size(), 0);  // new dims and size-1 dims repeat the input
  int64_t previous = -1;
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t d = broadcast_dims[i];
    if (d <= previous || d >= static_cast<int64_t>(out.size()))
      fail(op, ": broadcast_dims ", list_str(broadcast_dims), " must be strictly increasing dims of ",
           shape_str(out));
    if (in[i] != 1 && in[i] != out[d])
      fail(op, ": input dim ", i, " of ", shape_str(in), " cannot broadcast to dim ", d, " of ", shape_str(out));
    src[d] = in[i] == 1 ? 0 : xs[i];
    previous = d;
  }
  CopyPlan plan = plan_copy(out, src, row_major_strides(out));
  check_inside(op, plan, numel(in), numel(out));
  return plan;
}

CopyPlan plan_slice(std::string_view op, const Shape& in, const Shape& out, const IntList& starts,
                    const IntList& steps) {
  check_rank(op, "starts", starts.size(), in.size());
  check_rank(op, "strides", steps.size(), in.size());
  check_rank(op, "the output shape", out.size(), in.size());
  if (numel(out) == 0) return CopyPlan{};  // starts may sit at the end of an empty input
  const Strides xs = row_major_strides(in);
  Strides src(in.size());
  int64_t base = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (steps[i] < 1 || starts[i] < 0 || starts[i] + (out[i] - 1) * steps[i] >= in[i])
      fail(op, ": starts ", list_str(starts), " and strides ", list_str(steps), " take ", shape_str(out),
           " out of ", shape_str(in), ", past dim ", i);
    src[i] = xs[i] * steps[i];
    base += starts[i] * xs[i];
  }
  CopyPlan plan = plan_copy(out, src, row_major_strides(out), base, 0);
  check_inside(op, plan, numel(in), numel(out));
  return plan;
}

CopyPlan plan_pad(std::string_view op, const Shape& in, const Shape& out, const IntList& lo, const IntList& interior) {
  check_rank(op, "lo", lo.size(), in.size());
  check_rank(op, "interior", interior.size(), in.size());
  check_rank(op, "the output shape", out.size(), in.size());
  if (numel(in) == 0) return CopyPlan{};
  const Strides os = row_major_strides(out);
  Strides dst(in.size());
  int64_t base = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (lo[i] < 0 || interior[i] < 0 || lo[i] + (in[i] - 1) * (interior[i] + 1) >= out[i])
      fail(op, ": lo ", list_str(lo), " and interior ", list_str(interior), " put ", shape_str(in),
           " outside ", shape_str(out), " along dim ", i);
    dst[i] = os[i] * (interior[i] + 1);
    base += lo[i] * os[i];
  }
  CopyPlan plan = plan_copy(in, row_major_strides(in), dst, 0, base);
  check_inside(op, plan, numel(in), numel(out));
  return plan;
}

std::vector<CopyPlan> plan_cat(std::string_view op, const std::vector<Shape>& ins, const Shape& out, int64_t dim) {
  if (dim < 0 || dim >= static_cast<int64_t>(out.size()))
    fail(op, ": dim ", dim, " is out of range for the output ", shape_str(out));
  const Strides os = row_major_strides(out);
  std::vector<CopyPlan> plans;
  int64_t offset = 0;
  for (const Shape& xs : ins) {
    bool fits = xs.size() == out.size();
    for (size_t i = 0; fits && i < xs.size(); ++i) fits = static_cast<int64_t>(i) == dim || xs[i] == out[i];
    if (!fits) fail(op, ": input ", shape_str(xs), " does not match the output ", shape_str(out), " off dim ", dim);
    plans.push_back(plan_copy(xs, row_major_strides(xs), os, 0, offset * os[dim]));
    check_inside(op, plans.back(), numel(xs), numel(out));
    offset += xs[dim];
  }
  if (offset != out[dim])
    fail(op, ": the inputs add up to ", offset, " along dim ", dim, " but the output has ", out[dim]);
  return plans;
}

std::vector<int64_t> bucket_offsets(const std::vector<int64_t>& part_bytes) {
  std::vector<int64_t> offsets(part_bytes.size() + 1, 0);
  for (size_t i = 0; i < part_bytes.size(); ++i) offsets[i + 1] = offsets[i] + part_bytes[i];
  return offsets;
}

int widest_unit(std::initializer_list<uint64_t> values) {
  return widest_unit_of(std::span<const uint64_t>(values.begin(), values.size()));
}

int widen(CopyDesc& desc, int elem_size, uintptr_t src_addr, uintptr_t dst_addr) {
  if (desc.rank == 0) return elem_size;
  const int last = desc.rank - 1;
  if (desc.src[last] != 1 || desc.dst[last] != 1) return elem_size;
  // Every dim's stride in bytes, the run's length and both starts must be
  // multiples of the unit, or a wide element would straddle two runs.
  std::vector<uint64_t> bytes = {static_cast<uint64_t>(desc.size[last] * elem_size), src_addr, dst_addr};
  for (int k = 0; k < last; ++k) {
    bytes.push_back(static_cast<uint64_t>(desc.src[k] * elem_size));
    bytes.push_back(static_cast<uint64_t>(desc.dst[k] * elem_size));
  }
  const int unit = widest_unit_of(bytes);
  if (unit <= elem_size) return elem_size;
  const int64_t f = unit / elem_size;
  desc.size[last] /= f;
  for (int k = 0; k < last; ++k) {
    desc.src[k] /= f;
    desc.dst[k] /= f;
  }
  return unit;
}

uint64_t fill_pattern(double value, DType d) {
  switch (d) {
    case DType::f32: return bits_of(static_cast<float>(value));
    case DType::f64: return bits_of(value);
    case DType::f16: return bits_of(__double2half(value));
    case DType::bf16: return bits_of(__double2bfloat16(value));
    case DType::i32: return bits_of(saturating_int<int32_t>(value));
    case DType::i64: return bits_of(saturating_int<int64_t>(value));
    case DType::i8: return bits_of(saturating_int<int8_t>(value));
    case DType::boolean: return value != 0 ? 1 : 0;
  }
  FSDPC_CHECK(false) << "fill_pattern of dtype " << static_cast<int>(d);
  return 0;
}

}  // namespace fsdpc::cuda
