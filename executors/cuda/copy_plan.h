// Host-side plans of the CUDA data-movement ops: each op's copy is described
// as strides over its input and output, coalesced into at most kMaxCopyDims
// dims (kernels/copy.h's CopyDesc), checked to stay inside both buffers, and
// widened to 16-byte elements where alignment allows. Plain C++, so the
// plans are unit-tested without a GPU (test/cuda_copy_plan_test.cpp).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <utility>
#include <vector>

#include "executors/cuda/kernels/copy.h"
#include "executors/strided.h"  // Strides, row_major_strides
#include "ir/attr.h"
#include "ir/types.h"

namespace fsdpc::cuda {

// One launch: the walk `desc`, starting `src_offset` / `dst_offset`
// elements into the buffers.
struct CopyPiece {
  int64_t src_offset = 0, dst_offset = 0;
  CopyDesc desc;
};

// A whole copy: usually one piece; a walk that keeps more than kMaxCopyDims
// dims after coalescing has its outer dims enumerated here, one piece each.
struct CopyPlan {
  std::vector<CopyPiece> pieces;  // empty: nothing to copy
  int64_t count = 0;              // elements copied, over all pieces
  // One contiguous run on both sides (rank <= 1, unit strides): the caller
  // copies pieces[0] with cudaMemcpyAsync.
  bool contiguous() const;
};

// The copy of `shape` elements read at src_offset + sum(i_k * ss[k]) and
// written at dst_offset + sum(i_k * ds[k]). Size-1 dims are dropped and
// dims that continue each other on both sides merged (the CPU's
// push_coalesced rule).
CopyPlan plan_copy(const Shape& shape, const Strides& ss, const Strides& ds, int64_t src_offset = 0,
                   int64_t dst_offset = 0);

// One past the largest element offset the plan reads (first) and writes
// (second); {0, 0} for an empty plan.
std::pair<int64_t, int64_t> plan_extent(const CopyPlan& plan);

// The op plans. `op` names the op in errors ("cuda_permute"); attributes
// that do not fit the shapes, or a plan that would leave the input or the
// output buffer, are fsdpc::Error: the GPU must never be handed a copy that
// runs off a buffer.
CopyPlan plan_permute(std::string_view op, const Shape& in, const Shape& out, const IntList& dims);
CopyPlan plan_broadcast(std::string_view op, const Shape& in, const Shape& out, const IntList& broadcast_dims);
CopyPlan plan_slice(std::string_view op, const Shape& in, const Shape& out, const IntList& starts,
                    const IntList& steps);
// The interior copy of pad: x lands at `lo` with `interior` gaps between
// neighbours; the caller fills the output with the value first.
CopyPlan plan_pad(std::string_view op, const Shape& in, const Shape& out, const IntList& lo, const IntList& interior);
// One plan per input of cat, each writing its slab of the output.
std::vector<CopyPlan> plan_cat(std::string_view op, const std::vector<Shape>& ins, const Shape& out, int64_t dim);

// Byte offsets of consecutive parts of a bucket (pack/unpack): offsets[i]
// is where part i starts, the last entry the total.
std::vector<int64_t> bucket_offsets(const std::vector<int64_t>& part_bytes);

// The largest of 16, 8, 4, 2, 1 bytes that divides every value given
// (byte counts, strides in bytes, addresses): the widest unit a copy of
// them can move.
int widest_unit(std::initializer_list<uint64_t> values);

// Regroups a piece whose last dim is contiguous on both sides into wider
// elements (up to 16 bytes) when its byte sizes, strides and the two
// addresses allow; returns the new element size (elem_size when not).
int widen(CopyDesc& desc, int elem_size, uintptr_t src_addr, uintptr_t dst_addr);

// The bytes of `value` converted to dtype d as the IR converts (to bool:
// nonzero; float to integer: toward zero, saturating at the range, NaN to
// 0, as launch_convert; to bf16/f16: round to nearest even), in the low
// dtype_size(d) bytes.
uint64_t fill_pattern(double value, DType d);

}  // namespace fsdpc::cuda
