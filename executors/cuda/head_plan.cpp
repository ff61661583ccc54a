// The fused head's chunk and scratch layout on the GPU (head_plan.h).
#include "executors/cuda/head_plan.h"

#include <algorithm>

#include "ir/error.h"

namespace fsdpc::cuda {

namespace {

int64_t aligned(int64_t bytes) { return (bytes + kHeadAlign - 1) / kHeadAlign * kHeadAlign; }

// The ops that make dh and dw (with_grad: the loss too).
bool is_backward(OpId op) {
  return op == OpId::LinearCrossEntropyGrad || op == OpId::LinearCrossEntropyWithGrad ||
         op == OpId::LinearCrossEntropyStatsGrad;
}

}  // namespace

bool is_head_op(OpId op) {
  return op == OpId::LinearCrossEntropy || op == OpId::LinearCrossEntropyStats || is_backward(op);
}

HeadPlan plan_head(const BoundSymbol& b, const TensorType& h, const TensorType& w) {
  FSDPC_CHECK(is_head_op(b.op)) << "plan_head of " << op_name(b.op);
  FSDPC_CHECK(w.shape.size() == 2 && !h.shape.empty()) << op_name(b.op) << ": h " << shape_str(h.shape) << ", w "
                                                       << shape_str(w.shape);
  HeadPlan p;
  p.v = w.shape[0];
  p.c = w.shape[1];
  // The leading dims' product, not numel / C: with C = 0 there are still rows.
  p.rows = 1;
  for (size_t i = 0; i + 1 < h.shape.size(); ++i) p.rows *= h.shape[i];
  p.bf16 = h.dtype == DType::bf16;
  int64_t chunk = b.attrs.get_int_or("chunk", 0);
  if (chunk <= 0) chunk = kHeadChunkBytes / (static_cast<int64_t>(sizeof(float)) * std::max<int64_t>(p.v, 1));
  p.chunk = std::clamp<int64_t>(chunk, 1, std::max<int64_t>(p.rows, 1));
  const int64_t block = aligned(p.chunk * p.v * static_cast<int64_t>(sizeof(float)));
  p.zb_at = p.dw_at = p.losses_at = p.bytes = block;
  if (is_backward(b.op) && p.bf16) {
    // The products read the cotangent in bf16, as linear's rule does.
    p.dw_at = p.bytes += aligned(p.chunk * p.v * static_cast<int64_t>(sizeof(uint16_t)));
    p.narrow_dw = b.outputs.back().type.dtype != DType::f32;  // dw, each op's last output
    if (p.narrow_dw) p.bytes += aligned(p.v * p.c * static_cast<int64_t>(sizeof(float)));
  }
  p.losses_at = p.bytes;
  if (b.op == OpId::LinearCrossEntropy || b.op == OpId::LinearCrossEntropyWithGrad)
    p.bytes += aligned(p.rows * static_cast<int64_t>(sizeof(double)));
  return p;
}

}  // namespace fsdpc::cuda
