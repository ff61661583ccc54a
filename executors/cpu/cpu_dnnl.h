// Private to executors/cpu/: the one oneDNN engine and stream, the per-shape
// primitive cache, and the oneDNN calls the kernel families share (gemm,
// eltwise, softmax). Only executors/cpu/*.cpp include oneDNN, through here.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "ir/types.h"

namespace fsdpc::cpu {

// Created once, on first use; also holds oneDNN to one OpenMP thread.
dnnl::engine& dnnl_engine();

// What a primitive is cached under: a tag per kind, then its shape and
// attributes as integers (floats by their bits).
enum class PrimTag : int64_t { eltwise = 1, gemm, softmax };
using PrimKey = std::vector<int64_t>;
int64_t float_bits(float f);

// A cached primitive, and for a matmul that wants its weights in a blocked
// layout, the reorder that packs them (run per call: weights change per step).
struct CachedPrimitive {
  dnnl::primitive primitive;
  dnnl::primitive weights_reorder;  // empty: the weights are read as given
  dnnl::memory::desc weights_desc;  // the packed layout, when reordered
};

// The primitive cached under `key`, built by make() on first use, so a
// training loop builds each shape's primitive once.
CachedPrimitive& cached_primitive(const PrimKey& key, const std::function<CachedPrimitive()>& make);

// A memory object over caller-owned data (oneDNN takes a non-const pointer).
dnnl::memory wrap(const dnnl::memory::desc& md, const void* data);
// oneDNN's type for f32 or bf16 (the dtypes the oneDNN calls take).
dnnl::memory::data_type dnnl_type(DType d);
dnnl::memory::desc desc_of(const dnnl::memory::dims& dims, const dnnl::memory::dims& strides, DType d);
dnnl::memory::desc desc_of(const dnnl::memory::dims& dims, DType d);  // row-major
dnnl::memory::desc f32_desc(const dnnl::memory::dims& dims);          // row-major

// Runs p on the stream and waits (kernels are synchronous).
void execute(dnnl::primitive& p, const std::unordered_map<int, dnnl::memory>& args);

// dst[i] = f(src[i]) for a oneDNN eltwise algorithm (src may equal dst).
void eltwise(dnnl::algorithm alg, float alpha, float beta, const float* src, float* dst, int64_t n);

// c[p] = scale * (op(a[p]) @ op(b[p]) + bias), p over `batch`: a is [m, k],
// or [k, m] when a_transposed (a transpose folded into a matmul,
// passes/fold_transpose.h); b is [k, n], or [n, k] when b_transposed
// (linear's weight, attention's keys); batched_b false shares one b across
// the batch. bias is [n] or null. Rows of c are contiguous; the batch
// entries of a batched gemm may sit `*_step` elements apart (0: packed one
// after another), which lets attention work on a block of query rows of
// every head in place. a and b are both f32 or both bf16 (`in`); c is f32 or
// bf16 (`out`), and so is the bias; products accumulate in f32 either way.
struct Gemm {
  int64_t batch = 1, m = 0, k = 0, n = 0;
  bool a_transposed = false;
  bool b_transposed = false;
  bool batched_b = false;
  float scale = 1.0f;
  int64_t a_step = 0, b_step = 0, c_step = 0;
  DType in = DType::f32, out = DType::f32, bias = DType::f32;
  // c += scale * (op(a) @ op(b) + bias) instead of c = ...: a sum over
  // blocks of k (the fused head's weight gradient, a chunk of rows at a time)
  // accumulates in c without a second buffer.
  bool accumulate = false;
};
void gemm(const Gemm& g, const void* a, const void* b, const void* bias, void* c);

// Whether oneDNN runs bf16 products on this CPU (it needs AVX-512; 2.6 has
// no bf16 kernel, not even a reference one, below it). Probed once.
bool bf16_products_native();

// Softmax (or log-softmax) of f32 x viewed as [outer, n, inner] along n,
// into y of dtype `out` (f32, or bf16: rounded once from the f32 result).
void softmax_3d(const float* x, void* y, int64_t outer, int64_t n, int64_t inner, bool log,
                DType out = DType::f32);

}  // namespace fsdpc::cpu
