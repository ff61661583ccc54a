// Launch functions of the elementwise kernels (kernels/elementwise.cu):
// unary math, conversions, binary arithmetic, comparisons and where over n
// contiguous elements, enqueued on `stream` (never synchronised).
//
// Arithmetic on f32, bf16 and f16 storage is done in f32, on f64 in f64,
// on integers in the integer type (wrapping). An operand pointer may be
// null: that operand is then the scalar literal beside it, which takes the
// tensor operand's type as the IR says (see each function). The host caller
// (cuda_elementwise.cpp) checks dtypes against the matrix below and fails
// with the op's name; a combination outside it is an internal error here.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "executors/cuda/kernels/element_type.h"

namespace fsdpc::cuda {

enum class UnaryOp : uint8_t { neg, exp, log, tanh, sqrt, rsqrt, sin, cos };
enum class BinaryOp : uint8_t { add, sub, mul, div, pow, maximum };
enum class CompareOp : uint8_t { eq, ne, lt, le, gt, ge };

// y = op(x), both of type t: f32 or bf16; neg also i32 and i64.
void launch_unary(UnaryOp op, ElementType t, const void* x, void* y, int64_t n, cudaStream_t stream);

// y = x converted from `from` to `to` (any two element types): to bool is
// "nonzero" (NaN is nonzero), from bool is 0/1, floating to integer
// truncates toward zero, saturating at the integer's range (NaN gives 0).
void launch_convert(ElementType from, const void* x, ElementType to, void* y, int64_t n, cudaStream_t stream);

// y = a op b, all of type t: f32 or bf16; add, sub, mul and maximum also
// i32 and i64. A null a (or b) is the scalar a_scalar (b_scalar): kept in
// f32 for float types (not rounded to bf16, as PyTorch keeps a Python
// number), truncated for integers. maximum propagates NaN; pow with the
// exponent 1, 2 or 3 is a product, as on the CPU.
void launch_binary(BinaryOp op, ElementType t, const void* a, double a_scalar, const void* b,
                   double b_scalar, void* y, int64_t n, cudaStream_t stream);

// y = (a op b) as bool bytes; a and b of type t (any element type), either
// possibly a scalar literal (converted as by launch_binary; bool: nonzero).
void launch_compare(CompareOp op, ElementType t, const void* a, double a_scalar, const void* b,
                    double b_scalar, uint8_t* y, int64_t n, cudaStream_t stream);

// y = cond ? a : b; a, b, y of type t (any element type), either of a and b
// possibly a scalar literal, converted to t as convert_element_type would.
void launch_where(ElementType t, const uint8_t* cond, const void* a, double a_scalar, const void* b,
                  double b_scalar, void* y, int64_t n, cudaStream_t stream);

}  // namespace fsdpc::cuda
