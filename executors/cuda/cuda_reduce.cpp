// sum and amax of the CUDA executor: plan on the host (reduce_plan.h), then
// one pass of kernels/reduce.cu, or two when the plan splits a long
// reduction into chunks: f64 partials in a stream-ordered scratch buffer,
// then a fold of the partials into the output. Input and output are f32 or
// bf16; both passes accumulate in f64, as the CPU sums in double.
#include <string>

#include "executors/cuda/cuda_check.h"
#include "executors/cuda/cuda_context.h"
#include "executors/cuda/cuda_kernels.h"
#include "executors/cuda/kernels/reduce.h"
#include "executors/cuda/reduce_plan.h"
#include "ir/error.h"

namespace fsdpc::cuda {

namespace {

ElementType float_type(const std::string& name, const TensorView& v, const char* what) {
  switch (v.type->dtype) {
    case DType::f32: return ElementType::f32;
    case DType::bf16: return ElementType::bf16;
    default: break;
  }
  fail(name, ": ", what, " has dtype ", dtype_name(v.type->dtype), ", which is not supported (f32, bf16)");
}

// One pass over x as the plan lays it out, writing y (the output, or the
// partials when the plan is split).
void first_pass(const ReducePlan& p, ReduceOp op, ElementType xt, const void* x, ElementType yt, void* y,
                cudaStream_t s) {
  switch (p.layout) {
    case ReduceLayout::threads: return launch_reduce_threads(op, xt, x, yt, y, p.outer, p.reduced, p.inner, s);
    case ReduceLayout::rows: return launch_reduce_rows(op, xt, x, yt, y, p.outer, p.reduced, p.chunk, s);
    case ReduceLayout::columns:
      return launch_reduce_columns(op, xt, x, yt, y, p.outer, p.reduced, p.inner, p.chunk, s);
    case ReduceLayout::strided:
      return launch_reduce_strided(op, xt, x, yt, y, p.kept, p.reduced_dims, p.chunk, s);
    case ReduceLayout::none: return;
  }
}

// Folds the [outer, chunks, inner] partials of a split plan into y.
void second_pass(const ReducePlan& p, ReduceOp op, const double* partials, ElementType yt, void* y, cudaStream_t s) {
  const int64_t chunks = p.chunks();
  if (p.inner == 1)
    launch_reduce_rows(op, ElementType::f64, partials, yt, y, p.outer, chunks, chunks, s);
  else
    launch_reduce_columns(op, ElementType::f64, partials, yt, y, p.outer, chunks, p.inner, chunks, s);
}

}  // namespace

FSDPC_CUDA_KERNEL(reduce_kernel) {
  const std::string name = "cuda_" + std::string(op_name(b.op));
  FSDPC_CHECK(b.op == OpId::Sum || b.op == OpId::Amax) << op_name(b.op) << " is not a reduction";
  const ReduceOp op = b.op == OpId::Sum ? ReduceOp::sum : ReduceOp::amax;
  const ElementType xt = float_type(name, in[0], "x"), yt = float_type(name, out[0], "the output");
  const ReducePlan plan = plan_reduce(in[0].type->shape, b.attrs.get_ints("dims"), name);
  if (plan.layout == ReduceLayout::none) return;  // no output element
  CudaContext& c = cuda_context(ctx);
  const cudaStream_t s = c.compute();
  if (plan.chunks() == 1) return first_pass(plan, op, xt, in[0].data, yt, out[0].data, s);
  // Partials from the rank's scratch (accounted; at most ~2 * kTargetBlocks
  // * 32 doubles, columns): released once both passes are enqueued, which
  // is safe since later users run after them on the compute stream.
  const std::shared_ptr<void> scratch = c.scratch(static_cast<size_t>(plan.partials()) * sizeof(double));
  auto* partials = static_cast<double*>(scratch.get());
  first_pass(plan, op, xt, in[0].data, ElementType::f64, partials, s);
  second_pass(plan, op, partials, yt, out[0].data, s);
}

}  // namespace fsdpc::cuda
