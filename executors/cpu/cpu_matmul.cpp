// matmul and linear on oneDNN's matmul (brgemm JIT, at the core's FMA limit),
// in f32, or in bf16 with f32 accumulation (the AVX-512 BF16 or AMX dot
// products where the core has them); below AVX-512, where oneDNN has no bf16
// kernel, bf16 operands are widened and multiplied in f32 (run_in_f32).
// linear reads w [out, in] in place as a transposed [in, out] operand and
// adds its bias in the same primitive, so neither needs a copy or a pass; a
// matmul region (passes/fold_transpose.h) reads its permuted operands the
// same way, through transposed strides.
#include "executors/cpu/cpu_dnnl.h"
#include "executors/cpu/cpu_kernels.h"
#include "executors/cpu/cpu_region.h"

namespace fsdpc::cpu {

namespace {

// The last two dims of s, swapped when the operand is read transposed.
std::pair<int64_t, int64_t> rows_cols(const Shape& s, bool transposed) {
  const int64_t r = s[s.size() - 2], c = s.back();
  return transposed ? std::make_pair(c, r) : std::make_pair(r, c);
}

// out = op(a) @ op(b), where op swaps the last two dims of a transposed
// operand: a [..., M, K] (stored [..., K, M] when transposed), b [..., K, N]
// or [K, N] shared by every batch (stored with its last two dims swapped
// when transposed).
// The output is the operands' dtype or, for bf16 operands, f32 (matmul's
// out_dtype): oneDNN then writes its f32 accumulator as it is.
void matmul_of(const BoundSymbol& b, const TensorView& a, bool a_t, const TensorView& bv, bool b_t, const TensorView& out) {
  const DType d = product_dtype(b, {{a, "a"}, {bv, "b"}});
  const DType out_dtype = out.type->dtype;
  if (out_dtype != d && out_dtype != DType::f32)
    fail("cpu_matmul: the output is ", dtype_name(out_dtype), shape_str(out.type->shape), " for ", dtype_name(d),
         " operands; expected ", dtype_name(d), " or f32");
  if (d == DType::bf16 && !bf16_products_native())
    return run_in_f32({a, bv}, {out}, [&](const Views& in, const Views& o) { matmul_of(b, in[0], a_t, in[1], b_t, o[0]); });
  const Shape& as = shape_of(a);
  const Shape& bs = shape_of(bv);
  Gemm g;
  g.batch = prod(as, 0, as.size() - 2);
  std::tie(g.m, g.k) = rows_cols(as, a_t);
  g.n = rows_cols(bs, b_t).second;
  g.a_transposed = a_t;
  g.b_transposed = b_t;
  g.batched_b = bs.size() > 2;  // else one [K, N] shared by every batch
  g.in = d;
  g.out = g.bias = out_dtype;  // no bias; its dtype must be the output's
  gemm(g, a.data, bv.data, nullptr, out.data);
}

}  // namespace

FSDPC_CPU_KERNEL(matmul_kernel) { matmul_of(b, in[0], false, in[1], false, out[0]); }

void run_transposed_matmul(const BoundSymbol& b, const TransposedMatmul& t, const std::vector<TensorView>& in,
                           const std::vector<TensorView>& out) {
  matmul_of(b, in[t.a], t.a_transposed, in[t.b], t.b_transposed, out[0]);
}

FSDPC_CPU_KERNEL(linear_kernel) {
  const DType d = in.size() == 3 ? product_dtype(b, {{in[0], "x"}, {in[1], "w"}, {in[2], "b"}, {out[0], "the output"}})
                                 : product_dtype(b, {{in[0], "x"}, {in[1], "w"}, {out[0], "the output"}});
  if (d == DType::bf16 && !bf16_products_native())
    return run_in_f32(in, out, [&](const Views& in32, const Views& out32) { linear_kernel(ctx, b, in32, out32); });
  const Shape& xs = shape_of(in[0]);
  const Shape& ws = shape_of(in[1]);
  Gemm g;
  g.m = prod(xs, 0, xs.size() - 1);
  g.k = ws[1];
  g.n = ws[0];
  g.b_transposed = true;
  g.in = g.out = g.bias = d;
  gemm(g, in[0].data, in[1].data, in.size() == 3 ? in[2].data : nullptr, out[0].data);
}

}  // namespace fsdpc::cpu
