// Where the NCCL executor's bytes go for a gather or a reduce-scatter along
// a dimension other than 0. NCCL moves one contiguous block per member, so
// along dim > 0 the data is staged:
//  - all_gather: members' blocks land as [member][outer][inner] and are
//    interleaved into the result's [outer][member][inner] at wait;
//  - reduce_scatter: the input [outer][member][chunk] is packed as
//    [member][outer][chunk] before the reduction.
// Each plan is one strided copy (cudaMemcpy2DAsync's arguments, in bytes)
// per member. Plain C++: test/nccl_staging_test.cpp runs the plans on host
// buffers and compares the layouts with the MPI path's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fsdpc {

// dst[dst_offset + r * dst_pitch + i] = src[src_offset + r * src_pitch + i]
// for r < height, i < width.
struct Copy2D {
  size_t dst_offset = 0, dst_pitch = 0;
  size_t src_offset = 0, src_pitch = 0;
  size_t width = 0, height = 0;
};

// Gathered blocks [member][outer][inner_bytes] -> result [outer][member][inner_bytes].
std::vector<Copy2D> gather_unpack_plan(int64_t outer, int64_t inner_bytes, int members);
// Input [outer][member][chunk_bytes] -> send buffer [member][outer][chunk_bytes].
std::vector<Copy2D> scatter_pack_plan(int64_t outer, int64_t chunk_bytes, int members);

// Runs a plan between host buffers (what the device does with
// cudaMemcpy2DAsync); for tests.
void apply_on_host(const std::vector<Copy2D>& plan, void* dst, const void* src);

}  // namespace fsdpc
