// matmul and linear on oneDNN's matmul (brgemm JIT, at the core's FMA limit).
// linear reads w [out, in] in place as a transposed [in, out] operand and
// adds its bias in the same primitive, so neither needs a copy or a pass.
#include "executors/cpu/cpu_dnnl.h"
#include "executors/cpu/cpu_kernels.h"

namespace fsdpc::cpu {

FSDPC_CPU_KERNEL(matmul_kernel) {
  require_f32(b, in[0], "a");
  require_f32(b, in[1], "b");
  const Shape& as = shape_of(in[0]);
  const Shape& bs = shape_of(in[1]);
  Gemm g;
  g.batch = prod(as, 0, as.size() - 2);
  g.m = as[as.size() - 2];
  g.k = as.back();
  g.n = bs.back();
  g.batched_b = bs.size() > 2;  // else one [K, N] shared by every batch
  gemm(g, cdata<float>(in[0]), cdata<float>(in[1]), nullptr, mdata<float>(out[0]));
}

FSDPC_CPU_KERNEL(linear_kernel) {
  require_f32(b, in[0], "x");
  require_f32(b, in[1], "w");
  const Shape& xs = shape_of(in[0]);
  const Shape& ws = shape_of(in[1]);
  Gemm g;
  g.m = prod(xs, 0, xs.size() - 1);
  g.k = ws[1];
  g.n = ws[0];
  g.b_transposed = true;
  const float* bias = nullptr;
  if (in.size() == 3) {
    require_f32(b, in[2], "b");
    bias = cdata<float>(in[2]);
  }
  gemm(g, cdata<float>(in[0]), cdata<float>(in[1]), bias, mdata<float>(out[0]));
}

}  // namespace fsdpc::cpu
