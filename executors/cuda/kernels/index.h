// Launch functions of take (the embedding gather) and index_add (its
// scatter-add), kernels/index.cu. The table is seen as [outer, rows, inner]
// around the indexed dim, so each index moves one row of `inner` elements.
//
// Out-of-range indices: the CPU throws before writing anything, but a
// kernel cannot throw and the host cannot look at the indices without
// synchronising. So the kernels skip a bad index (take leaves its output
// row zero, index_add adds nothing for it) and record it in a per-device
// fault word; read_index_faults() reads and clears that word. It waits for
// the compute stream (through the context's polling wait), so it belongs
// where the host waits anyway (the end of a step, a test), or after every
// take/index_add when FSDPC_CUDA_SYNC_CHECKS=1 (cuda_index.cpp), where the
// error then names the op.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fsdpc::cuda {

enum class IndexType : int32_t { i32, i64 };
// The element types index_add accumulates (atomicAdd on each).
enum class AddType : int32_t { f32, bf16, i32, i64 };

// out[o, j, :] = table[o, idx[j], :] for o < outer, j < n; a row is
// `units` units of unit_bytes bytes (1, 2, 4, 8 or 16: the caller picks
// the widest that divides the row and both addresses). out has outer * n
// rows, the table outer * rows.
void launch_take(const void* table, const void* idx, IndexType index_type, void* out, int64_t outer, int64_t rows,
                 int64_t n, int64_t units, int unit_bytes, cudaStream_t stream);

// out[o, idx[j], :] += src[o, j, :] for o < outer, j < n, rows of `inner`
// elements, with atomicAdd (repeated indices add up; the order of the adds,
// and so the rounding of float sums, is not fixed). out already holds the
// table.
void launch_index_add(void* out, const void* idx, IndexType index_type, const void* src, AddType type,
                      int64_t outer, int64_t rows, int64_t n, int64_t inner, cudaStream_t stream);

// What the fault word held: how many index positions were out of range
// since the last read, the first (smallest) such position in the index
// tensor, and which ops saw them.
struct IndexFaults {
  uint64_t count = 0;
  uint64_t first_position = 0;
  bool in_take = false, in_index_add = false;
};

class CudaContext;

// Reads and clears the current device's fault word after the work queued
// on the compute stream so far; waits for that stream with
// CudaContext::wait_idle (under the NCCL watchdog on an NcclContext).
IndexFaults read_index_faults(CudaContext& ctx);

}  // namespace fsdpc::cuda
