// The nn composites run whole on the GPU: gelu, softmax, layer_norm,
// cross_entropy, silu and rms_norm. Each KernelFn checks the dtypes claims() cannot see (its
// inputs'), reads the attributes, splits the shape (nn_plan.h) and calls
// its kernels/<family>.cu launches on the compute stream. f32 or bf16
// storage, f32 arithmetic; outputs take the dtype the IR's meta gave them.
#include <cuda_bf16.h>

#include <algorithm>

#include "executors/cuda/cuda_check.h"
#include "executors/cuda/cuda_context.h"
#include "executors/cuda/cuda_kernels.h"
#include "executors/cuda/kernels/cross_entropy.h"
#include "executors/cuda/kernels/gelu.h"
#include "executors/cuda/kernels/layer_norm.h"
#include "executors/cuda/kernels/rms_norm.h"
#include "executors/cuda/kernels/silu.h"
#include "executors/cuda/kernels/softmax.h"
#include "executors/cuda/nn_plan.h"

namespace fsdpc::cuda {

namespace {

using bf16 = __nv_bfloat16;

template <class T>
const T* cptr(const TensorView& v) {
  return static_cast<const T*>(v.data);
}
template <class T>
T* mptr(const TensorView& v) {
  return static_cast<T*>(v.data);
}

// Whether a float operand is stored as bf16 (else f32); any other dtype is
// the user's error, named with the op.
bool is_bf16(const BoundSymbol& b, const TensorView& v, const char* what) {
  const DType d = v.type->dtype;
  if (d == DType::f32) return false;
  if (d == DType::bf16) return true;
  fail("cuda_", op_name(b.op), ": ", what, " has dtype ", dtype_name(d), "; expected f32 or bf16");
}

// The meta functions give these operands x's dtype; a trace built around
// them (parsed JSON, a hand-written pass) is refused, not misread.
void require_dtype_of(const BoundSymbol& b, const TensorView& x, const char* x_name, const TensorView& v,
                      const char* what) {
  if (v.type->dtype != x.type->dtype)
    fail("cuda_", op_name(b.op), ": ", what, " has dtype ", dtype_name(v.type->dtype), " but ", x_name,
         " has ", dtype_name(x.type->dtype), "; expected the same");
}

}  // namespace

FSDPC_CUDA_KERNEL(gelu_kernel) {
  const bool bf = is_bf16(b, in[0], "x");
  require_dtype_of(b, in[0], "x", out[0], "the output");
  const int64_t n = numel(out[0].type->shape);
  const cudaStream_t s = cuda_context(ctx).compute();
  if (bf)
    launch_gelu(cptr<bf16>(in[0]), mptr<bf16>(out[0]), n, s);
  else
    launch_gelu(cptr<float>(in[0]), mptr<float>(out[0]), n, s);
}

FSDPC_CUDA_KERNEL(softmax_kernel) {
  const bool bf = is_bf16(b, in[0], "x");
  require_dtype_of(b, in[0], "x", out[0], "the output");
  const Shape& shape = in[0].type->shape;
  const int64_t dim = b.attrs.get_int("dim");
  if (dim < 0 || dim >= static_cast<int64_t>(shape.size()))
    fail("cuda_softmax: dim ", dim, " is out of range for x of rank ", shape.size());
  const AxisSplit a = split_at(shape, static_cast<size_t>(dim));
  const cudaStream_t s = cuda_context(ctx).compute();
  if (a.inner == 1) {
    const SoftmaxRows p{.rows = a.outer, .cols = a.n};
    if (bf)
      launch_softmax_rows(cptr<bf16>(in[0]), mptr<bf16>(out[0]), p, s);
    else
      launch_softmax_rows(cptr<float>(in[0]), mptr<float>(out[0]), p, s);
  } else if (bf) {
    launch_softmax_strided(cptr<bf16>(in[0]), mptr<bf16>(out[0]), a.outer, a.n, a.inner, s);
  } else {
    launch_softmax_strided(cptr<float>(in[0]), mptr<float>(out[0]), a.outer, a.n, a.inner, s);
  }
}

FSDPC_CUDA_KERNEL(layer_norm_kernel) {
  const bool bf = is_bf16(b, in[0], "x");
  require_dtype_of(b, in[0], "x", in[1], "w");
  require_dtype_of(b, in[0], "x", in[2], "b");
  require_dtype_of(b, in[0], "x", out[0], "the output");
  const RowSplit r = split_rows(in[0].type->shape);
  if (numel(in[1].type->shape) != r.cols || numel(in[2].type->shape) != r.cols)
    fail("cuda_layer_norm: w and b must have x's last dim, ", r.cols, ", elements");
  const auto eps = static_cast<float>(b.attrs.get_double("eps"));
  const cudaStream_t s = cuda_context(ctx).compute();
  if (bf)
    launch_layer_norm(cptr<bf16>(in[0]), cptr<bf16>(in[1]), cptr<bf16>(in[2]), mptr<bf16>(out[0]), r.rows,
                      r.cols, eps, s);
  else
    launch_layer_norm(cptr<float>(in[0]), cptr<float>(in[1]), cptr<float>(in[2]), mptr<float>(out[0]),
                      r.rows, r.cols, eps, s);
}

FSDPC_CUDA_KERNEL(silu_kernel) {
  const bool bf = is_bf16(b, in[0], "x");
  require_dtype_of(b, in[0], "x", out[0], "the output");
  const int64_t n = numel(out[0].type->shape);
  const cudaStream_t s = cuda_context(ctx).compute();
  if (bf)
    launch_silu(cptr<bf16>(in[0]), mptr<bf16>(out[0]), n, s);
  else
    launch_silu(cptr<float>(in[0]), mptr<float>(out[0]), n, s);
}

FSDPC_CUDA_KERNEL(rms_norm_kernel) {
  const bool bf = is_bf16(b, in[0], "x");
  require_dtype_of(b, in[0], "x", in[1], "w");
  require_dtype_of(b, in[0], "x", out[0], "the output");
  const RowSplit r = split_rows(in[0].type->shape);
  if (numel(in[1].type->shape) != r.cols) fail("cuda_rms_norm: w must have x's last dim, ", r.cols, ", elements");
  const auto eps = static_cast<float>(b.attrs.get_double("eps"));
  const cudaStream_t s = cuda_context(ctx).compute();
  if (bf)
    launch_rms_norm(cptr<bf16>(in[0]), cptr<bf16>(in[1]), mptr<bf16>(out[0]), r.rows, r.cols, eps, s);
  else
    launch_rms_norm(cptr<float>(in[0]), cptr<float>(in[1]), mptr<float>(out[0]), r.rows, r.cols, eps, s);
}

FSDPC_CUDA_KERNEL(cross_entropy_kernel) {
  const bool bf = is_bf16(b, in[0], "logits");
  require_dtype_of(b, in[0], "logits", out[0], "the output");
  const DType td = in[1].type->dtype;
  if (td != DType::i32 && td != DType::i64)
    fail("cuda_cross_entropy: targets have dtype ", dtype_name(td), "; expected i32 or i64");
  const RowSplit r = split_rows(in[0].type->shape);
  if (numel(in[1].type->shape) != r.rows)
    fail("cuda_cross_entropy: ", numel(in[1].type->shape), " targets for ", r.rows, " rows of logits");
  CudaContext& c = cuda_context(ctx);
  const cudaStream_t s = c.compute();
  // Per-row losses from the rank's scratch (rows floats), released once the
  // mean kernel is enqueued.
  const std::shared_ptr<void> held = c.scratch(sizeof(float) * static_cast<size_t>(std::max<int64_t>(r.rows, 0)));
  auto* losses = static_cast<float*>(held.get());
  const bool i64 = td == DType::i64;
  if (bf && i64)
    launch_cross_entropy(cptr<bf16>(in[0]), cptr<int64_t>(in[1]), mptr<bf16>(out[0]), losses, r.rows, r.cols, s);
  else if (bf)
    launch_cross_entropy(cptr<bf16>(in[0]), cptr<int32_t>(in[1]), mptr<bf16>(out[0]), losses, r.rows, r.cols, s);
  else if (i64)
    launch_cross_entropy(cptr<float>(in[0]), cptr<int64_t>(in[1]), mptr<float>(out[0]), losses, r.rows, r.cols,
                         s);
  else
    launch_cross_entropy(cptr<float>(in[0]), cptr<int32_t>(in[1]), mptr<float>(out[0]), losses, r.rows, r.cols,
                         s);
}

}  // namespace fsdpc::cuda
