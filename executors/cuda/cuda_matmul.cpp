// matmul and linear on cuBLASLt (lt_matmul.h). As on the CPU, linear reads
// w [out, in] in place as a transposed operand and adds its bias in the
// GEMM's epilogue, so neither needs a copy nor a second kernel.
#include "executors/cuda/cuda_context.h"
#include "executors/cuda/cuda_kernels.h"
#include "executors/cuda/lt_matmul.h"
#include "ir/error.h"

namespace fsdpc::cuda {

namespace {

// The claim pass admits only f32 and bf16, and meta functions make every
// operand share a's dtype (a matmul's output may be f32 instead: its
// out_dtype); checked once more here because a wrong dtype would be read as
// garbage rather than fail.
DType float_dtype(const BoundSymbol& b, const Views& in) {
  const DType d = in[0].type->dtype;
  FSDPC_CHECK(d == DType::f32 || d == DType::bf16) << op_name(b.op) << " on cuda: unsupported dtype " << dtype_name(d);
  for (const TensorView& v : in)
    FSDPC_CHECK(v.type->dtype == d) << op_name(b.op) << " on cuda: operands of mixed dtypes";
  return d;
}

}  // namespace

FSDPC_CUDA_KERNEL(matmul_kernel) {
  const DType dtype = float_dtype(b, in);
  const GemmPlan plan = plan_matmul(in[0].type->shape, in[1].type->shape);
  FSDPC_CHECK(plan.out == out[0].type->shape)
      << "matmul: planned " << shape_str(plan.out) << ", output is " << shape_str(out[0].type->shape);
  lt_matmul(cuda_context(ctx), plan, in[0].data, in[1].data, nullptr, out[0].data, dtype, out[0].type->dtype);
}

FSDPC_CUDA_KERNEL(linear_kernel) {
  const DType dtype = float_dtype(b, in);
  FSDPC_CHECK(out[0].type->dtype == dtype) << "linear on cuda: " << dtype_name(dtype) << " operands, "
                                           << dtype_name(out[0].type->dtype) << " output";
  const bool has_bias = in.size() == 3;
  const GemmPlan plan = plan_linear(in[0].type->shape, in[1].type->shape, has_bias);
  FSDPC_CHECK(plan.out == out[0].type->shape)
      << "linear: planned " << shape_str(plan.out) << ", output is " << shape_str(out[0].type->shape);
  lt_matmul(cuda_context(ctx), plan, in[0].data, in[1].data, has_bias ? in[2].data : nullptr, out[0].data,
            dtype, dtype);
}

}  // namespace fsdpc::cuda
