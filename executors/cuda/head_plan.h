// The fused language-model head's plan on the GPU (cuda_head.cpp): how many
// rows of logits a chunk holds and where the parts of its one scratch block
// lie. Host code without a device, so the CUDA executor's scratch_bytes, the
// kernels and a test on a machine without a GPU all read the same plan: the
// memory plan (runtime/planner/memory_plan.h) then counts exactly the block
// the kernels take from KernelContext::scratch_pool.
#pragma once

#include <cstdint>

#include "ir/trace.h"

namespace fsdpc::cuda {

// For the head op `b` (linear_cross_entropy, its gradient, both at once,
// or the vocabulary slice's two ops) over h [..., C] and w [V, C]. Offsets are
// bytes from the block's start, each a multiple of kHeadAlign.
struct HeadPlan {
  int64_t rows = 0, c = 0, v = 0;
  int64_t chunk = 0;           // rows of logits a block holds, 1 <= chunk <= max(rows, 1)
  bool bf16 = false;           // bf16 operands: bf16 products, logits rounded to bf16
  bool narrow_dw = false;      // a backward whose dw is bf16: accumulated in f32 scratch
  int64_t zb_at = 0;           // a bf16 backward's [chunk, V] bf16 cotangent
  int64_t dw_at = 0;           // dw's [V, C] f32 accumulator when narrow_dw
  int64_t losses_at = 0;       // linear_cross_entropy's (and with_grad's) [rows] f64 row losses
  int64_t bytes = 0;           // the whole block
};

// cudaMalloc's alignment, which the allocator's blocks keep: every part
// starts as aligned as the block, as cuBLASLt's fastest kernels want.
inline constexpr int64_t kHeadAlign = 256;

// f32 logits a chunk holds when the op has no `chunk` attribute: 32 MiB,
// as the CPU's (cpu_head.h), 167 rows of GPT-2's 50257 words.
inline constexpr int64_t kHeadChunkBytes = int64_t{32} << 20;

// The plan of `b` (its `chunk` attribute, else kHeadChunkBytes of f32
// logits) for inputs h and w; a backward reads dw's dtype from b's last
// output.
HeadPlan plan_head(const BoundSymbol& b, const TensorType& h, const TensorType& w);

// Whether `op` is one of the five head ops plan_head plans.
bool is_head_op(OpId op);

}  // namespace fsdpc::cuda
