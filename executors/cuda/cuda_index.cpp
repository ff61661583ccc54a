// take (the embedding gather) and index_add (its scatter-add) on CUDA. The
// table is seen as [outer, rows, inner] around `dim`, as on the CPU
// (executors/cpu/cpu_index.cpp). Unlike the CPU, the indices are checked on
// the device, where a bad one is skipped and recorded rather than thrown
// (kernels/index.h says why); FSDPC_CUDA_SYNC_CHECKS=1 reads the record
// after each op, synchronising, so a bad token id fails naming the op.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>

#include "executors/cuda/copy_plan.h"
#include "executors/cuda/cuda_check.h"
#include "executors/cuda/cuda_context.h"
#include "executors/cuda/cuda_kernels.h"
#include "executors/cuda/kernels/index.h"
#include "ir/error.h"

namespace fsdpc::cuda {

namespace {

struct Rows {
  int64_t outer, rows, inner;
};

int64_t count_of(const TensorView& v) { return numel(v.type->shape); }

Rows rows_around(std::string_view op, const Shape& s, int64_t dim) {
  if (dim < 0 || dim >= static_cast<int64_t>(s.size()))
    fail(op, ": dim ", dim, " is out of range for a table of shape ", shape_str(s));
  Rows r{1, s[dim], 1};
  for (int64_t i = 0; i < dim; ++i) r.outer *= s[i];
  for (size_t i = dim + 1; i < s.size(); ++i) r.inner *= s[i];
  return r;
}

IndexType index_type(std::string_view op, const TensorView& idx) {
  const DType d = idx.type->dtype;
  if (d == DType::i32) return IndexType::i32;
  if (d == DType::i64) return IndexType::i64;
  fail(op, ": indices have dtype ", dtype_name(d), "; expected i32 or i64");
}

bool sync_checks() {
  static const bool on = [] {
    const char* v = std::getenv("FSDPC_CUDA_SYNC_CHECKS");
    return v != nullptr && std::strcmp(v, "") != 0 && std::strcmp(v, "0") != 0;
  }();
  return on;
}

// With FSDPC_CUDA_SYNC_CHECKS set: waits for the op and fails if any of
// its indices (or an earlier unchecked op's) was out of range.
void check_now(std::string_view op, const Rows& r, int64_t dim, CudaContext& ctx) {
  if (!sync_checks()) return;
  const IndexFaults f = read_index_faults(ctx);
  if (f.count > 0)
    fail(op, ": ", f.count, " indices out of range for a table of ", r.rows, " entries along dim ", dim,
         ", the first at position ", f.first_position);
}

}  // namespace

FSDPC_CUDA_KERNEL(take_kernel) {
  constexpr std::string_view kOp = "cuda_take";
  const int64_t dim = b.attrs.get_int("dim");
  const Rows r = rows_around(kOp, in[0].type->shape, dim);
  const IndexType it = index_type(kOp, in[1]);
  if (in[0].type->dtype != out[0].type->dtype)
    fail(kOp, ": the table has dtype ", dtype_name(in[0].type->dtype), " but the output ",
         dtype_name(out[0].type->dtype));
  const int64_t n = count_of(in[1]);
  if (count_of(out[0]) != r.outer * n * r.inner)
    fail(kOp, ": the output ", shape_str(out[0].type->shape), " does not hold ", n, " rows of the table ",
         shape_str(in[0].type->shape), " along dim ", dim);
  if (count_of(out[0]) == 0) return;
  const int64_t row_bytes = r.inner * dtype_size(out[0].type->dtype);
  const int unit = widest_unit({static_cast<uint64_t>(row_bytes), reinterpret_cast<uintptr_t>(in[0].data),
                                reinterpret_cast<uintptr_t>(out[0].data)});
  const cudaStream_t stream = cuda_context(ctx).compute();
  launch_take(in[0].data, in[1].data, it, out[0].data, r.outer, r.rows, n, row_bytes / unit, unit, stream);
  check_now(kOp, r, dim, cuda_context(ctx));
}

FSDPC_CUDA_KERNEL(index_add_kernel) {
  constexpr std::string_view kOp = "cuda_index_add";
  const int64_t dim = b.attrs.get_int("dim");
  const Rows r = rows_around(kOp, in[0].type->shape, dim);
  const IndexType it = index_type(kOp, in[1]);
  const DType d = out[0].type->dtype;
  AddType type = AddType::f32;
  switch (d) {
    case DType::f32: type = AddType::f32; break;
    case DType::bf16: type = AddType::bf16; break;
    case DType::i32: type = AddType::i32; break;
    case DType::i64: type = AddType::i64; break;
    default: fail(kOp, ": dtype ", dtype_name(d), " is not supported (f32, bf16, i32, i64)");
  }
  if (in[0].type->dtype != d || in[2].type->dtype != d)
    fail(kOp, ": the table (", dtype_name(in[0].type->dtype), "), the source (", dtype_name(in[2].type->dtype),
         ") and the output (", dtype_name(d), ") must share a dtype");
  const int64_t n = count_of(in[1]);
  if (count_of(in[2]) != r.outer * n * r.inner || count_of(out[0]) != count_of(in[0]))
    fail(kOp, ": the source ", shape_str(in[2].type->shape), " does not hold ", n, " rows of the table ",
         shape_str(in[0].type->shape), " along dim ", dim);
  const cudaStream_t stream = cuda_context(ctx).compute();
  if (out[0].data != in[0].data && count_of(out[0]) > 0)
    FSDPC_CUDA_CHECK(cudaMemcpyAsync(out[0].data, in[0].data, count_of(out[0]) * dtype_size(d),
                                     cudaMemcpyDeviceToDevice, stream));
  if (count_of(in[2]) == 0) return;
  launch_index_add(out[0].data, in[1].data, it, in[2].data, type, r.outer, r.rows, n, r.inner, stream);
  check_now(kOp, r, dim, cuda_context(ctx));
}

}  // namespace fsdpc::cuda
