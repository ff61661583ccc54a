// Shape, creation and buffer kernels on CUDA: reshape, permute,
// broadcast_in_dim, slice, pad (with `interior`), cat, full, iota, pack and
// unpack. As on the CPU (executors/cpu/cpu_shape.cpp) they move bytes, so
// every dtype works; each op's copy is planned by copy_plan.h and run as
// cudaMemcpyAsync when contiguous, else as kernels/copy.cu's strided copy.
#include <cuda_runtime_api.h>

#include "executors/cuda/copy_plan.h"
#include "executors/cuda/cuda_check.h"
#include "executors/cuda/cuda_context.h"
#include "executors/cuda/cuda_kernels.h"
#include "executors/cuda/kernels/copy.h"
#include "ir/error.h"

namespace fsdpc::cuda {

namespace {

const Shape& shape_of(const TensorView& v) { return v.type->shape; }
int64_t count_of(const TensorView& v) { return numel(v.type->shape); }
int elem_size(const TensorView& v) { return static_cast<int>(dtype_size(v.type->dtype)); }

cudaStream_t stream_of(KernelContext& ctx) { return cuda_context(ctx).compute(); }

// Data movement reinterprets nothing: what goes in comes out in its dtype.
void require_same_dtype(std::string_view op, const TensorView& x, const TensorView& y) {
  if (x.type->dtype != y.type->dtype)
    fail(op, ": the input has dtype ", dtype_name(x.type->dtype), " but the output ", dtype_name(y.type->dtype));
}

void copy_bytes(void* dst, const void* src, int64_t bytes, cudaStream_t stream) {
  if (bytes > 0) FSDPC_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
}

// Runs a plan between buffers of elem_size-byte elements: one memcpy when
// it is contiguous, else one strided-copy launch per piece, each widened
// to 16-byte units where its alignment allows.
void run_plan(const CopyPlan& plan, const void* src, void* dst, int elem_size, cudaStream_t stream) {
  if (plan.pieces.empty()) return;
  const char* s = static_cast<const char*>(src);
  char* o = static_cast<char*>(dst);
  if (plan.contiguous()) {
    const CopyPiece& p = plan.pieces[0];
    copy_bytes(o + p.dst_offset * elem_size, s + p.src_offset * elem_size, plan.count * elem_size, stream);
    return;
  }
  for (const CopyPiece& p : plan.pieces) {
    const char* from = s + p.src_offset * elem_size;
    char* to = o + p.dst_offset * elem_size;
    CopyDesc desc = p.desc;
    const int unit = widen(desc, elem_size, reinterpret_cast<uintptr_t>(from), reinterpret_cast<uintptr_t>(to));
    launch_strided_copy(from, to, desc, unit, stream);
  }
}

void fill(const TensorView& y, double value, cudaStream_t stream) {
  launch_fill(y.data, count_of(y), elem_size(y), fill_pattern(value, y.type->dtype), stream);
}

}  // namespace

FSDPC_CUDA_KERNEL(reshape_kernel) {
  // Row-major data is already in reshape order; the runtime aliases the
  // buffers and never calls this, but a copy is right when it does not.
  const int64_t bytes = count_of(out[0]) * elem_size(out[0]);
  if (count_of(in[0]) * elem_size(in[0]) != bytes)
    fail("cuda_reshape: ", shape_str(shape_of(in[0])), " and ", shape_str(shape_of(out[0])),
         " hold different numbers of bytes");
  if (out[0].data != in[0].data) copy_bytes(out[0].data, in[0].data, bytes, stream_of(ctx));
}

FSDPC_CUDA_KERNEL(permute_kernel) {
  require_same_dtype("cuda_permute", in[0], out[0]);
  if (count_of(out[0]) == 0) return;
  const CopyPlan plan = plan_permute("cuda_permute", shape_of(in[0]), shape_of(out[0]), b.attrs.get_ints("dims"));
  run_plan(plan, in[0].data, out[0].data, elem_size(out[0]), stream_of(ctx));
}

FSDPC_CUDA_KERNEL(broadcast_in_dim_kernel) {
  require_same_dtype("cuda_broadcast_in_dim", in[0], out[0]);
  if (count_of(out[0]) == 0) return;
  const CopyPlan plan = plan_broadcast("cuda_broadcast_in_dim", shape_of(in[0]), shape_of(out[0]),
                                       b.attrs.get_ints("broadcast_dims"));
  run_plan(plan, in[0].data, out[0].data, elem_size(out[0]), stream_of(ctx));
}

FSDPC_CUDA_KERNEL(slice_kernel) {
  require_same_dtype("cuda_slice", in[0], out[0]);
  if (count_of(out[0]) == 0) return;  // starts may sit at the end of an empty input
  const CopyPlan plan = plan_slice("cuda_slice", shape_of(in[0]), shape_of(out[0]), b.attrs.get_ints("starts"),
                                   b.attrs.get_ints("strides"));
  run_plan(plan, in[0].data, out[0].data, elem_size(out[0]), stream_of(ctx));
}

FSDPC_CUDA_KERNEL(pad_kernel) {
  require_same_dtype("cuda_pad", in[0], out[0]);
  if (count_of(out[0]) == 0) return;
  const Shape& xs = shape_of(in[0]);
  const IntList interior = b.attrs.has("interior") ? b.attrs.get_ints("interior") : IntList(xs.size(), 0);
  // Planned before anything is written, so bad attributes leave the
  // output untouched.
  const CopyPlan plan = plan_pad("cuda_pad", xs, shape_of(out[0]), b.attrs.get_ints("lo"), interior);
  const cudaStream_t stream = stream_of(ctx);
  // The fill covers the interior too and the copy then overwrites it, in
  // stream order: simpler than filling only the border, and the border is
  // most of a pad's output in its use here (the VJP of a slice).
  fill(out[0], b.attrs.get_double("value"), stream);
  run_plan(plan, in[0].data, out[0].data, elem_size(out[0]), stream);
}

FSDPC_CUDA_KERNEL(cat_kernel) {
  if (count_of(out[0]) == 0) return;
  std::vector<Shape> shapes;
  for (const TensorView& x : in) {
    require_same_dtype("cuda_cat", x, out[0]);
    shapes.push_back(shape_of(x));
  }
  const std::vector<CopyPlan> plans = plan_cat("cuda_cat", shapes, shape_of(out[0]), b.attrs.get_int("dim"));
  const cudaStream_t stream = stream_of(ctx);
  for (size_t i = 0; i < in.size(); ++i) run_plan(plans[i], in[i].data, out[0].data, elem_size(out[0]), stream);
}

FSDPC_CUDA_KERNEL(full_kernel) { fill(out[0], b.attrs.get_double("value"), stream_of(ctx)); }

FSDPC_CUDA_KERNEL(iota_kernel) {
  IotaType type = IotaType::f32;
  switch (out[0].type->dtype) {
    case DType::f32: type = IotaType::f32; break;
    case DType::f16: type = IotaType::f16; break;
    case DType::bf16: type = IotaType::bf16; break;
    case DType::f64: type = IotaType::f64; break;
    case DType::i32: type = IotaType::i32; break;
    case DType::i64: type = IotaType::i64; break;
    default:
      fail("cuda_iota: dtype ", dtype_name(out[0].type->dtype),
           " is not supported (f32, f16, bf16, f64, i32, i64)");
  }
  launch_iota(out[0].data, count_of(out[0]), type, stream_of(ctx));
}

FSDPC_CUDA_KERNEL(pack_kernel) {
  std::vector<int64_t> bytes;
  for (const TensorView& x : in) {
    require_same_dtype("cuda_pack", x, out[0]);
    bytes.push_back(count_of(x) * elem_size(x));
  }
  const std::vector<int64_t> at = bucket_offsets(bytes);
  const int64_t total = count_of(out[0]) * elem_size(out[0]);
  if (at.back() > total)
    fail("cuda_pack: the inputs hold ", at.back(), " bytes but the buffer only ", total);
  const cudaStream_t stream = stream_of(ctx);
  char* dst = static_cast<char*>(out[0].data);
  for (size_t i = 0; i < in.size(); ++i) copy_bytes(dst + at[i], in[i].data, bytes[i], stream);
}

FSDPC_CUDA_KERNEL(unpack_kernel) {
  std::vector<int64_t> bytes;
  for (const TensorView& y : out) {
    require_same_dtype("cuda_unpack", in[0], y);
    bytes.push_back(count_of(y) * elem_size(y));
  }
  const std::vector<int64_t> at = bucket_offsets(bytes);
  if (at.back() > count_of(in[0]) * elem_size(in[0]))
    fail("cuda_unpack: the output shapes need more than the buffer's ", count_of(in[0]), " elements");
  const cudaStream_t stream = stream_of(ctx);
  const char* src = static_cast<const char*>(in[0].data);
  for (size_t i = 0; i < out.size(); ++i) copy_bytes(out[i].data, src + at[i], bytes[i], stream);
}

}  // namespace fsdpc::cuda
