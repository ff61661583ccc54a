// Row-major GEMMs on cuBLASLt, for matmul, linear and attention. Planning
// (shapes -> one strided batch, host loops, which operand is broadcast) is
// pure host code, unit-tested without a GPU; lt_matmul() runs a plan.
//
// Row-major to cuBLASLt: cuBLASLt is column-major, and a row-major [r, c]
// matrix is the same memory as a column-major [c, r] one, its transpose. So
// C = A·B is computed as C^T = B^T·A^T: cuBLASLt's A operand is our B, its B
// is our A, and its D (= C) is n x m with ld = our row stride. No data moves
// and every layout stays CUBLASLT_ORDER_COL, the order every algorithm
// supports (ORDER_ROW narrows the heuristic's choice on some versions).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/types.h"

namespace fsdpc::cuda {

class CudaContext;

// A host loop around the strided batch, for batch dims one stride per
// operand cannot describe (a [2, 1, M, K] times b [1, 3, K, N]). Steps in
// elements; 0 broadcasts that operand along the loop.
struct OuterLoop {
  int64_t count = 1;
  int64_t step_a = 0, step_b = 0, step_c = 0;
  bool operator==(const OuterLoop&) const = default;
};

// One row-major problem, per batch entry:
//   C[m, n] = alpha * op(A)[m, k] · op(B)[k, n] (+ bias[n] on every row)
//             (+ beta * C: a product added into C, the fused head's dw over
//             its chunks of rows)
// A is stored [m, k] (row stride lda), or [k, m] when trans_a; B is stored
// [k, n], or [n, k] when trans_b (linear's weight, attention's keys).
struct GemmPlan {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  int64_t lda = 0, ldb = 0, ldc = 0;  // row strides, elements
  // The batch one cuBLASLt call runs; strides in elements, 0 = the operand
  // is shared by every entry (a 2-D matmul right operand, a broadcast dim).
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  std::vector<OuterLoop> outer;  // outermost first; empty: one call
  bool bias = false;             // bias[n] through CUBLASLT_EPILOGUE_BIAS
  float alpha = 1.0f;            // attention's scale; not part of the cache key
  float beta = 0.0f;             // 0 or 1 (accumulate); not part of the cache key
  Shape out;                     // C's shape, contiguous row-major

  int64_t calls() const;  // cuBLASLt calls: product of the outer counts
  bool empty() const;     // nothing to compute (a zero-sized m, n or batch)
  bool operator==(const GemmPlan&) const = default;
};

// cuBLASLt's largest batch count (CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT is int32).
constexpr int64_t kMaxLtBatch = 2147483647;

// matmul with NumPy-style broadcasting of the batch dims (a superset of the
// IR's rule: b is [K, N] or has a's batch dims). a is [..., M, K] ([..., K, M]
// when trans_a), b is [..., K, N] ([..., N, K] when trans_b). Size-1 batch
// dims are dropped, dims that are contiguous in every operand are merged,
// the innermost becomes the strided batch and the rest host loops. When b
// is shared by every entry and a is a plain [batch, M, K] block, the batch
// is folded into M: one taller GEMM beats a batch of small ones.
GemmPlan plan_matmul(const Shape& a, const Shape& b, bool trans_a = false, bool trans_b = false);

// linear: x [..., in] times w [out, in] transposed (+ bias [out]): every
// leading dim of x folds into M, one GEMM.
GemmPlan plan_linear(const Shape& x, const Shape& w, bool has_bias);

// cuBLASLt's column-major view of one plan operand.
struct LtMatrix {
  uint64_t rows = 0, cols = 0;  // as stored, before the transpose
  int64_t ld = 0;
  int64_t batch_stride = 0;
  bool transpose = false;
  bool operator==(const LtMatrix&) const = default;
};

// The column-major problem cuBLASLt is given: D(n x m) = op(a)·op(b) with
// a = our B, b = our A, d = our C (see the file comment).
struct LtProblem {
  LtMatrix a, b, d;
  int32_t batch = 1;
};

LtProblem lt_problem(const GemmPlan& plan);

// Largest power of two, at most 256, that divides the byte address of
// every batch entry and loop step of an operand: what the heuristic may
// assume (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES). A view into a packed
// buffer need not be 256-byte aligned, which cuBLASLt assumes by default.
uint32_t lt_alignment(const void* ptr, int64_t elem_bytes, const std::vector<int64_t>& element_steps);

// Runs `plan` on ctx's compute stream: f32 (CUBLAS_COMPUTE_32F, or
// CUBLAS_COMPUTE_32F_FAST_TF32 when ctx.allow_tf32()) or bf16 (bf16
// A/B/C/bias, f32 accumulation and scale). `bias` must be non-null exactly
// when plan.bias. Never synchronises the host. K = 0 writes zeros (or the
// bias) without calling cuBLASLt, whose support for empty reductions
// varies by version; with beta 1 it leaves C as it is.
// `dtype` is a's and b's; c (and the bias) are `out_dtype`, which is
// `dtype` or, for bf16 operands, f32: the accumulator written unrounded.
void lt_matmul(CudaContext& ctx, const GemmPlan& plan, const void* a, const void* b, const void* bias, void* c,
               DType dtype, DType out_dtype);

}  // namespace fsdpc::cuda
