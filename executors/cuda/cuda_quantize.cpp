// quantize and dequantize on the GPU (kernels/quantize.cu): ir/quantize.h's
// int8 rows, f32 or bf16 values.
#include <cuda_bf16.h>

#include "executors/cuda/cuda_context.h"
#include "executors/cuda/cuda_kernels.h"
#include "executors/cuda/kernels/quantize.h"
#include "ir/error.h"

namespace fsdpc::cuda {

namespace {

struct Rows {
  int64_t rows, n;
};

Rows rows_of(const Shape& values) {
  const int64_t n = values.back();
  return {n == 0 ? 0 : numel(values) / n, n};
}

}  // namespace

FSDPC_CUDA_KERNEL(quantize_kernel) {
  const TensorView& x = in[0];
  const Rows r = rows_of(x.type->shape);
  const int64_t block = b.attrs.get_int("block");
  auto* q = static_cast<int8_t*>(out[0].data);
  const cudaStream_t s = cuda_context(ctx).compute();
  if (x.type->dtype == DType::f32)
    launch_quantize(static_cast<const float*>(x.data), q, r.rows, r.n, block, s);
  else if (x.type->dtype == DType::bf16)
    launch_quantize(static_cast<const __nv_bfloat16*>(x.data), q, r.rows, r.n, block, s);
  else
    fail("cuda_quantize: x has dtype ", dtype_name(x.type->dtype), "; expected f32 or bf16");
}

FSDPC_CUDA_KERNEL(dequantize_kernel) {
  const TensorView& y = out[0];
  if (in[0].type->dtype != DType::i8)
    fail("cuda_dequantize: q has dtype ", dtype_name(in[0].type->dtype), "; expected i8");
  const Rows r = rows_of(y.type->shape);
  const int64_t block = b.attrs.get_int("block");
  const auto* q = static_cast<const int8_t*>(in[0].data);
  const cudaStream_t s = cuda_context(ctx).compute();
  if (y.type->dtype == DType::f32)
    launch_dequantize(q, static_cast<float*>(y.data), r.rows, r.n, block, s);
  else
    launch_dequantize(q, static_cast<__nv_bfloat16*>(y.data), r.rows, r.n, block, s);
}

}  // namespace fsdpc::cuda
