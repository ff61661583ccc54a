// take (the embedding gather) and index_add (its scatter-add). The table is
// viewed as [outer, rows, inner] around `dim`, so each index moves one
// contiguous block of `inner` elements. Indices are checked before anything
// is written: a bad token id is the user's data, not a crash.
#include <cstring>

#include "executors/cpu/cpu_kernels.h"

namespace fsdpc::cpu {

namespace {

struct Rows {
  int64_t outer, rows, inner;
};

Rows rows_around(const Shape& s, int64_t dim) {
  return Rows{prod(s, 0, dim), s[dim], prod(s, dim + 1, s.size())};
}

// The indices as row numbers, each checked against the table's extent.
std::vector<int64_t> checked_indices(const BoundSymbol& b, const TensorView& idx, const TensorView& table,
                                     int64_t dim) {
  std::vector<int64_t> rows(count_of(idx));
  const DType d = idx.type->dtype;
  if (d == DType::i64) {
    if (!rows.empty()) std::memcpy(rows.data(), idx.data, rows.size() * sizeof(int64_t));  // an empty view's data may be null
  }
  else if (d == DType::i32)
    for (size_t j = 0; j < rows.size(); ++j) rows[j] = cdata<int32_t>(idx)[j];
  else
    fail(op_name(b.op), ": indices have dtype ", dtype_name(d), "; expected i32 or i64");
  const int64_t n = shape_of(table)[dim];
  for (size_t j = 0; j < rows.size(); ++j)
    if (rows[j] < 0 || rows[j] >= n)
      fail(op_name(b.op), ": index ", rows[j], " at position ", j, " is out of range for a table of ", n,
           " entries along dim ", dim, " (input ", dtype_name(table.type->dtype), shape_str(shape_of(table)),
           ")");
  return rows;
}

template <class T>
void add_rows(const Rows& r, const std::vector<int64_t>& rows, const T* src, T* dst) {
  const int64_t n = static_cast<int64_t>(rows.size());
  for (int64_t o = 0; o < r.outer; ++o)
    for (int64_t j = 0; j < n; ++j) {
      const T* from = src + (o * n + j) * r.inner;
      T* to = dst + (o * r.rows + rows[j]) * r.inner;
      for (int64_t i = 0; i < r.inner; ++i) to[i] += from[i];
    }
}

}  // namespace

FSDPC_CPU_KERNEL(take_kernel) {
  const int64_t dim = b.attrs.get_int("dim");
  const Rows r = rows_around(shape_of(in[0]), dim);
  const std::vector<int64_t> rows = checked_indices(b, in[1], in[0], dim);
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t block = r.inner * dtype_size(out[0].type->dtype);
  if (block == 0) return;
  const char* src = static_cast<const char*>(in[0].data);
  char* dst = static_cast<char*>(out[0].data);
  // Each output block is written once: split over the rank's threads.
  FSDPC_CPU_PARALLEL_FOR(r.outer * n * r.inner)
  for (int64_t o = 0; o < r.outer; ++o)
    for (int64_t j = 0; j < n; ++j) std::memcpy(dst + (o * n + j) * block, src + (o * r.rows + rows[j]) * block, block);
}

FSDPC_CPU_KERNEL(index_add_kernel) {
  const int64_t dim = b.attrs.get_int("dim");
  const Rows r = rows_around(shape_of(in[0]), dim);
  const std::vector<int64_t> rows = checked_indices(b, in[1], in[0], dim);
  const DType d = out[0].type->dtype;
  if (d != DType::f32 && d != DType::i32 && d != DType::i64)
    fail("cpu_index_add: dtype ", dtype_name(d), " is not supported (f32, i32, i64)");
  if (out[0].data != in[0].data && count_of(out[0]) > 0)
    std::memcpy(out[0].data, in[0].data, count_of(out[0]) * dtype_size(d));
  if (d == DType::f32) return add_rows(r, rows, cdata<float>(in[2]), mdata<float>(out[0]));
  if (d == DType::i32) return add_rows(r, rows, cdata<int32_t>(in[2]), mdata<int32_t>(out[0]));
  add_rows(r, rows, cdata<int64_t>(in[2]), mdata<int64_t>(out[0]));
}

}  // namespace fsdpc::cpu
