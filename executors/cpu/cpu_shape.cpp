// Shape, creation and buffer kernels: reshape, permute, broadcast_in_dim,
// slice, pad (with `interior`), cat, full, iota, pack and unpack. They move
// bytes, so any dtype the CPU holds works; the movement is strided_copy.
#include <cstring>

#include "executors/cpu/cpu_kernels.h"

namespace fsdpc::cpu {

namespace {

int64_t elem_size(const TensorView& v) { return dtype_size(v.type->dtype); }

const char* bytes(const TensorView& v) { return static_cast<const char*>(v.data); }

// Fills n elements of dtype d with `value` converted as the IR converts.
void fill(const BoundSymbol& b, void* data, DType d, int64_t n, double value) {
  visit_dtype(b, "the output", d, [&](auto t) {
    using T = decltype(t);
    T* p = static_cast<T*>(data);
    const T v = convert_value<T>(value);
    for (int64_t i = 0; i < n; ++i) p[i] = v;
  });
}

}  // namespace

FSDPC_CPU_KERNEL(reshape_kernel) {
  // Row-major data is already in reshape order; the runtime may even alias.
  if (out[0].data != in[0].data) std::memmove(out[0].data, in[0].data, count_of(out[0]) * elem_size(out[0]));
}

FSDPC_CPU_KERNEL(permute_kernel) {
  const IntList& dims = b.attrs.get_ints("dims");
  const Strides xs = row_major_strides(shape_of(in[0]));
  Strides src(dims.size());
  for (size_t k = 0; k < dims.size(); ++k) src[k] = xs[dims[k]];
  strided_copy(in[0].data, src, out[0].data, row_major_strides(shape_of(out[0])), shape_of(out[0]), elem_size(out[0]));
}

FSDPC_CPU_KERNEL(broadcast_in_dim_kernel) {
  const IntList& bd = b.attrs.get_ints("broadcast_dims");
  const Shape& xs = shape_of(in[0]);
  const Strides x_strides = row_major_strides(xs);
  Strides src(shape_of(out[0]).size(), 0);  // new and size-1 dims repeat the input
  for (size_t i = 0; i < bd.size(); ++i) src[bd[i]] = xs[i] == 1 ? 0 : x_strides[i];
  strided_copy(in[0].data, src, out[0].data, row_major_strides(shape_of(out[0])), shape_of(out[0]), elem_size(out[0]));
}

FSDPC_CPU_KERNEL(slice_kernel) {
  const IntList& starts = b.attrs.get_ints("starts");
  const IntList& steps = b.attrs.get_ints("strides");
  const Strides xs = row_major_strides(shape_of(in[0]));
  Strides src(xs.size());
  int64_t base = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    src[i] = xs[i] * steps[i];
    base += starts[i] * xs[i];
  }
  if (count_of(out[0]) == 0) return;  // starts may sit at the end of an empty input
  const int64_t es = elem_size(out[0]);
  strided_copy(bytes(in[0]) + base * es, src, out[0].data, row_major_strides(shape_of(out[0])), shape_of(out[0]), es);
}

FSDPC_CPU_KERNEL(pad_kernel) {
  const Shape& xs = shape_of(in[0]);
  const IntList& lo = b.attrs.get_ints("lo");
  const IntList interior = b.attrs.has("interior") ? b.attrs.get_ints("interior") : IntList(xs.size(), 0);
  const Strides os = row_major_strides(shape_of(out[0]));
  Strides dst(xs.size());
  int64_t base = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    dst[i] = os[i] * (interior[i] + 1);
    base += lo[i] * os[i];
  }
  const int64_t n = count_of(out[0]);
  fill(b, out[0].data, out[0].type->dtype, n, b.attrs.get_double("value"));
  if (count_of(in[0]) == 0) return;
  const int64_t es = elem_size(out[0]);
  strided_copy(in[0].data, row_major_strides(xs), static_cast<char*>(out[0].data) + base * es, dst, xs, es);
}

FSDPC_CPU_KERNEL(cat_kernel) {
  const int64_t dim = b.attrs.get_int("dim");
  const Strides os = row_major_strides(shape_of(out[0]));
  const int64_t es = elem_size(out[0]);
  char* dst = static_cast<char*>(out[0].data);
  int64_t offset = 0;
  for (const TensorView& x : in) {
    const Shape& xs = shape_of(x);
    strided_copy(x.data, row_major_strides(xs), dst + offset * os[dim] * es, os, xs, es);
    offset += xs[dim];
  }
}

FSDPC_CPU_KERNEL(full_kernel) {
  fill(b, out[0].data, out[0].type->dtype, count_of(out[0]), b.attrs.get_double("value"));
}

FSDPC_CPU_KERNEL(iota_kernel) {
  const int64_t n = count_of(out[0]);
  visit_dtype(b, "the output", out[0].type->dtype, [&](auto t) {
    using T = decltype(t);
    T* p = mdata<T>(out[0]);
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(i);
  });
}

FSDPC_CPU_KERNEL(pack_kernel) {
  char* dst = static_cast<char*>(out[0].data);
  for (const TensorView& x : in) {
    const int64_t n = count_of(x) * elem_size(x);
    if (n > 0) std::memcpy(dst, x.data, n);
    dst += n;
  }
}

FSDPC_CPU_KERNEL(unpack_kernel) {
  const char* src = bytes(in[0]);
  const int64_t total = count_of(in[0]) * elem_size(in[0]);
  int64_t at = 0;
  for (const TensorView& y : out) {
    const int64_t n = count_of(y) * elem_size(y);
    if (at + n > total)
      fail("cpu_unpack: the output shapes need more than the buffer's ", count_of(in[0]), " elements");
    if (n > 0) std::memcpy(y.data, src + at, n);
    at += n;
  }
}

}  // namespace fsdpc::cpu
