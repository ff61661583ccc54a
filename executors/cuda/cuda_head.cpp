// The fused language-model head on the GPU (passes/fuse_head.h):
// linear_cross_entropy, its gradient and both at once over the whole
// vocabulary, and a tensor-parallel rank's vocabulary slice,
// linear_cross_entropy_stats and its gradient (passes/tensor_parallel_vocab.cpp). The CPU's chunk loop
// (executors/cpu/cpu_head.h), on the compute stream:
//   for each chunk of rows, z [n, V] = h[r0:r0+n] wᵀ by cuBLASLt into f32
//   (bf16 operands: bf16 products accumulated in f32), then a row kernel
//   (kernels/linear_cross_entropy.cu):
//     forward   each row's loss (or a slice's lse and target logit);
//     backward  the logits' cotangent dz, in place (f32) or into a bf16
//               copy (bf16 products), then dh's rows = dz w and
//               dw (+)= dzᵀ h's rows (beta 1 after the first chunk), dw
//               accumulated in f32 and narrowed once when it is bf16.
// The forward's loss is the mean of per-row f64 losses, summed in a fixed
// order by one block: the same run to run, and no float atomics.
//
// Scratch: one block (head_plan.h), from KernelContext::scratch_pool, the
// rank's allocator, whose size the CUDA executor's scratch_bytes gives
// with the same plan_head(), so the memory plan counts it exactly. It is
// released as soon as the work is enqueued: the allocator hands blocks out
// in host order and the compute stream runs in that order.
//
// Targets out of range poison their rows with NaN instead of failing
// (kernels/linear_cross_entropy.h): the host cannot see them without
// synchronising.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <memory>

#include "executors/cuda/cuda_check.h"
#include "executors/cuda/cuda_context.h"
#include "executors/cuda/cuda_kernels.h"
#include "executors/cuda/head_plan.h"
#include "executors/cuda/kernels/elementwise.h"
#include "executors/cuda/kernels/linear_cross_entropy.h"
#include "executors/cuda/lt_matmul.h"
#include "ir/error.h"

namespace fsdpc::cuda {

namespace {

HeadIndex index_of(const BoundSymbol& b, const TensorView& v, const char* what) {
  const DType d = v.type->dtype;
  if (d != DType::i32 && d != DType::i64)
    fail("cuda_", op_name(b.op), ": ", what, " has dtype ", dtype_name(d), "; expected i32 or i64");
  return HeadIndex{v.data, d == DType::i64};
}

// The row operands and the loss are f32 (the loss's dtype for f32 and
// bf16 operands alike, ir/meta.h); anything else is refused, not misread.
float* f32_of(const BoundSymbol& b, const TensorView& v, const char* what) {
  if (v.type->dtype != DType::f32)
    fail("cuda_", op_name(b.op), ": ", what, " has dtype ", dtype_name(v.type->dtype), "; expected f32");
  return static_cast<float*>(v.data);
}

// h [rows, C] and w [V, C], both f32 or both bf16, and the targets.
struct HeadOperands {
  const char* h = nullptr;
  const void* w = nullptr;
  DType dt = DType::f32;
  HeadIndex targets;

  HeadOperands(const BoundSymbol& b, const Views& in, const HeadPlan& p)
      : h(static_cast<const char*>(in[0].data)), w(in[1].data), dt(in[0].type->dtype),
        targets(index_of(b, in[2], "targets")) {
    if (dt != DType::f32 && dt != DType::bf16)
      fail("cuda_", op_name(b.op), ": h has dtype ", dtype_name(dt), "; expected f32 or bf16");
    if (in[1].type->dtype != dt)
      fail("cuda_", op_name(b.op), ": w has dtype ", dtype_name(in[1].type->dtype), " but h has ",
           dtype_name(dt), "; expected the same");
    if (numel(in[2].type->shape) != p.rows)
      fail("cuda_", op_name(b.op), ": ", numel(in[2].type->shape), " targets for ", p.rows, " rows of h");
  }
  int64_t elem() const { return dtype_size(dt); }
  const void* h_rows(const HeadPlan& p, int64_t r0) const { return h + r0 * p.c * elem(); }
  // The chunk's view for the row kernels: the targets from row r0 on.
  HeadChunk chunk(const HeadPlan& p, const float* z, int64_t r0, int64_t n) const {
    const auto* t = static_cast<const char*>(targets.data) + r0 * (targets.i64 ? 8 : 4);
    return HeadChunk{z, n, p.v, p.bf16, HeadIndex{t, targets.i64}};
  }
};

// The block: from the rank's allocator while the runtime runs the kernel
// (counted by the memory plan), else the context's stream-ordered scratch
// (kernel tests without a runtime). None for an empty vocabulary and no
// rows, as the memory plan counts none.
std::shared_ptr<void> head_block(KernelContext& ctx, const HeadPlan& p) {
  if (p.bytes == 0) return nullptr;
  if (ctx.scratch_pool) return ctx.scratch_pool->scratch(static_cast<size_t>(p.bytes), false);
  return cuda_context(ctx).scratch(static_cast<size_t>(p.bytes));
}

// z [n, V] = h[r0:r0+n] wᵀ, accumulated and written in f32.
void logits(CudaContext& c, const HeadOperands& hd, const HeadPlan& p, int64_t r0, int64_t n, float* z) {
  lt_matmul(c, plan_linear({n, p.c}, {p.v, p.c}, false), hd.h_rows(p, r0), hd.w, nullptr, z, hd.dt, DType::f32);
}

// The backward's chunk loop: to_dz(chunk, dz, r0) writes the chunk's
// cotangent, then the products add it into dh's rows and dw.
void head_backward(CudaContext& c, const HeadOperands& hd, const HeadPlan& p, char* block, const TensorView& dh,
                   const TensorView& dw, const std::function<void(const HeadChunk&, const HeadOut&, int64_t)>& to_dz) {
  const cudaStream_t s = c.compute();
  const DType dw_dtype = dw.type->dtype;
  FSDPC_CHECK(dh.type->dtype == hd.dt && (dw_dtype == hd.dt || dw_dtype == DType::f32) &&
              p.narrow_dw == (dw_dtype != DType::f32))
      << "fused head on cuda: dh " << dtype_name(dh.type->dtype) << ", dw " << dtype_name(dw_dtype) << " for "
      << dtype_name(hd.dt) << " operands";
  if (p.rows == 0) {  // no rows: dw = 0 (and dh is empty)
    const size_t bytes = static_cast<size_t>(p.v * p.c * dtype_size(dw_dtype));
    if (bytes) FSDPC_CUDA_CHECK(cudaMemsetAsync(dw.data, 0, bytes, s));
    return;
  }
  auto* z = reinterpret_cast<float*>(block);
  // bf16 products read the cotangent in bf16, as linear's rule does.
  const HeadOut dz{p.bf16 ? static_cast<void*>(block + p.zb_at) : static_cast<void*>(z), p.bf16};
  // dw accumulates over the chunks in f32: in place when dw is f32, else
  // in the block, narrowed once at the end.
  auto* dw32 = p.narrow_dw ? reinterpret_cast<float*>(block + p.dw_at) : static_cast<float*>(dw.data);
  auto* dh_rows = static_cast<char*>(dh.data);
  for (int64_t r0 = 0; r0 < p.rows; r0 += p.chunk) {
    const int64_t n = std::min(p.chunk, p.rows - r0);
    logits(c, hd, p, r0, n, z);
    to_dz(hd.chunk(p, z, r0, n), dz, r0);
    // dh's rows = dz [n, V] w [V, C], in h's dtype.
    lt_matmul(c, plan_matmul({n, p.v}, {p.v, p.c}), dz.data, hd.w, nullptr, dh_rows + r0 * p.c * hd.elem(), hd.dt,
              hd.dt);
    // dw (+)= dzᵀ [V, n] h's rows [n, C], in f32.
    GemmPlan gw = plan_matmul({n, p.v}, {n, p.c}, true, false);
    gw.beta = r0 > 0 ? 1.0f : 0.0f;
    lt_matmul(c, gw, dz.data, hd.h_rows(p, r0), nullptr, dw32, hd.dt, DType::f32);
  }
  if (p.narrow_dw) launch_convert(ElementType::f32, dw32, ElementType::bf16, dw.data, p.v * p.c, s);
}

// The slice's offset (a device scalar) and its vocabulary.
HeadSlice slice_of(const BoundSymbol& b, const Views& in) {
  return HeadSlice{index_of(b, in[3], "offset"), b.attrs.get_int("vocab")};
}

}  // namespace

FSDPC_CUDA_KERNEL(linear_cross_entropy_kernel) {
  const HeadPlan p = plan_head(b, *in[0].type, *in[1].type);
  const HeadOperands hd(b, in, p);
  float* loss = f32_of(b, out[0], "the loss");
  CudaContext& c = cuda_context(ctx);
  const cudaStream_t s = c.compute();
  const std::shared_ptr<void> held = head_block(ctx, p);
  char* block = static_cast<char*>(held.get());
  auto* z = reinterpret_cast<float*>(block);
  auto* losses = reinterpret_cast<double*>(block + p.losses_at);
  for (int64_t r0 = 0; r0 < p.rows; r0 += p.chunk) {
    const int64_t n = std::min(p.chunk, p.rows - r0);
    logits(c, hd, p, r0, n, z);
    launch_head_losses(hd.chunk(p, z, r0, n), losses + r0, s);
  }
  launch_head_mean(losses, p.rows, loss, s);
}

FSDPC_CUDA_KERNEL(linear_cross_entropy_grad_kernel) {
  const HeadPlan p = plan_head(b, *in[0].type, *in[1].type);
  const HeadOperands hd(b, in, p);
  const float* g = f32_of(b, in[3], "g");
  CudaContext& c = cuda_context(ctx);
  const std::shared_ptr<void> held = head_block(ctx, p);
  head_backward(c, hd, p, static_cast<char*>(held.get()), out[0], out[1],
                [&](const HeadChunk& chunk, const HeadOut& dz, int64_t) {
                  launch_head_softmax_grad(chunk, g, p.rows, dz, c.compute());
                });
}

// Both at once (passes/head_grad_forward.h): each chunk's row losses, then
// its cotangent from the same logits, so nothing is recomputed.
FSDPC_CUDA_KERNEL(linear_cross_entropy_with_grad_kernel) {
  const HeadPlan p = plan_head(b, *in[0].type, *in[1].type);
  const HeadOperands hd(b, in, p);
  float* loss = f32_of(b, out[0], "the loss");
  const float* g = f32_of(b, in[3], "g");
  CudaContext& c = cuda_context(ctx);
  const std::shared_ptr<void> held = head_block(ctx, p);
  char* block = static_cast<char*>(held.get());
  auto* losses = reinterpret_cast<double*>(block + p.losses_at);
  head_backward(c, hd, p, block, out[1], out[2], [&](const HeadChunk& chunk, const HeadOut& dz, int64_t r0) {
    launch_head_losses(chunk, losses + r0, c.compute());  // reads z; the cotangent may then overwrite it
    launch_head_softmax_grad(chunk, g, p.rows, dz, c.compute());
  });
  launch_head_mean(losses, p.rows, loss, c.compute());
}

FSDPC_CUDA_KERNEL(linear_cross_entropy_stats_kernel) {
  const HeadPlan p = plan_head(b, *in[0].type, *in[1].type);
  const HeadOperands hd(b, in, p);
  const HeadSlice slice = slice_of(b, in);
  float* lse = f32_of(b, out[0], "lse");
  float* tl = f32_of(b, out[1], "the target logit");
  CudaContext& c = cuda_context(ctx);
  const std::shared_ptr<void> held = head_block(ctx, p);
  auto* z = static_cast<float*>(held.get());
  for (int64_t r0 = 0; r0 < p.rows; r0 += p.chunk) {
    const int64_t n = std::min(p.chunk, p.rows - r0);
    logits(c, hd, p, r0, n, z);
    launch_head_slice_stats(hd.chunk(p, z, r0, n), slice, lse + r0, tl + r0, c.compute());
  }
}

FSDPC_CUDA_KERNEL(linear_cross_entropy_stats_grad_kernel) {
  const HeadPlan p = plan_head(b, *in[0].type, *in[1].type);
  const HeadOperands hd(b, in, p);
  const HeadSlice slice = slice_of(b, in);
  const float* lse = f32_of(b, in[4], "lse");
  const float* dlse = f32_of(b, in[5], "lse's cotangent");
  const float* dtl = f32_of(b, in[6], "the target logit's cotangent");
  CudaContext& c = cuda_context(ctx);
  const std::shared_ptr<void> held = head_block(ctx, p);
  head_backward(c, hd, p, static_cast<char*>(held.get()), out[0], out[1],
                [&](const HeadChunk& chunk, const HeadOut& dz, int64_t r0) {
                  launch_head_slice_grad(chunk, slice, lse + r0, dlse + r0, dtl + r0, dz, c.compute());
                });
}

}  // namespace fsdpc::cuda
