// expr_kernel: any elementwise op the CPU executor has no hand-written kernel
// for runs its scalar expression (ir/scalar_exprs.def), so a new op runs here
// from its table row alone. The expression is interpreted a block of
// elements at a time: each node computes a block in one loop over a small
// stack buffer, so the dispatch costs once per node and block, not per
// element, and the simple loops vectorise. f32 arithmetic (a comparison's
// operands f32, its output bool); a bool input (select's condition) reads as
// 0 or 1. Blocks split over the rank's threads; each element is computed by
// one thread in one order, so results do not depend on the thread count.
#include <cmath>
#include <cstring>

#include "executors/cpu/cpu_kernels.h"
#include "ir/scalar_expr.h"

namespace fsdpc::cpu {

namespace {

constexpr int64_t kBlock = 256;

struct Operands {
  const Views* in = nullptr;
  const BoundSymbol* b = nullptr;
};

template <class F>
void each(float* y, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(i);
}

// Node `e` for elements [base, base + n) into y.
void eval_block(const ScalarExpr& e, const Operands& ops, int64_t base, int64_t n, float* y) {
  if (e.prim == ScalarPrim::arg) {
    const Operand& o = ops.b->inputs[static_cast<size_t>(e.arg)];
    if (o.is_scalar()) {
      const float v = static_cast<float>(*o.scalar);
      return each(y, n, [&](int64_t) { return v; });
    }
    const TensorView& v = (*ops.in)[static_cast<size_t>(e.arg)];
    if (v.type->dtype == DType::boolean) {
      const uint8_t* x = cdata<uint8_t>(v) + base;
      return each(y, n, [&](int64_t i) { return x[i] ? 1.0f : 0.0f; });
    }
    std::memcpy(y, cdata<float>(v) + base, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  if (e.prim == ScalarPrim::constant) {
    const float v = static_cast<float>(e.value);
    return each(y, n, [&](int64_t) { return v; });
  }
  float x[kBlock], z[kBlock], w[kBlock];
  eval_block(e.children[0], ops, base, n, x);
  if (e.children.size() > 1) eval_block(e.children[1], ops, base, n, z);
  if (e.children.size() > 2) eval_block(e.children[2], ops, base, n, w);
  switch (e.prim) {
    case ScalarPrim::neg: return each(y, n, [&](int64_t i) { return -x[i]; });
    case ScalarPrim::exp: return each(y, n, [&](int64_t i) { return std::exp(x[i]); });
    case ScalarPrim::log: return each(y, n, [&](int64_t i) { return std::log(x[i]); });
    case ScalarPrim::tanh: return each(y, n, [&](int64_t i) { return std::tanh(x[i]); });
    case ScalarPrim::sqrt: return each(y, n, [&](int64_t i) { return std::sqrt(x[i]); });
    case ScalarPrim::sin: return each(y, n, [&](int64_t i) { return std::sin(x[i]); });
    case ScalarPrim::cos: return each(y, n, [&](int64_t i) { return std::cos(x[i]); });
    case ScalarPrim::add: return each(y, n, [&](int64_t i) { return x[i] + z[i]; });
    case ScalarPrim::sub: return each(y, n, [&](int64_t i) { return x[i] - z[i]; });
    case ScalarPrim::mul: return each(y, n, [&](int64_t i) { return x[i] * z[i]; });
    case ScalarPrim::div: return each(y, n, [&](int64_t i) { return x[i] / z[i]; });
    case ScalarPrim::pow: return each(y, n, [&](int64_t i) { return std::pow(x[i], z[i]); });
    case ScalarPrim::max:  // a NaN on either side wins, as torch.maximum
      return each(y, n, [&](int64_t i) { return ((x[i] > z[i]) | (x[i] != x[i])) ? x[i] : z[i]; });
    case ScalarPrim::eq: return each(y, n, [&](int64_t i) { return x[i] == z[i] ? 1.0f : 0.0f; });
    case ScalarPrim::ne: return each(y, n, [&](int64_t i) { return x[i] != z[i] ? 1.0f : 0.0f; });
    case ScalarPrim::lt: return each(y, n, [&](int64_t i) { return x[i] < z[i] ? 1.0f : 0.0f; });
    case ScalarPrim::le: return each(y, n, [&](int64_t i) { return x[i] <= z[i] ? 1.0f : 0.0f; });
    case ScalarPrim::gt: return each(y, n, [&](int64_t i) { return x[i] > z[i] ? 1.0f : 0.0f; });
    case ScalarPrim::ge: return each(y, n, [&](int64_t i) { return x[i] >= z[i] ? 1.0f : 0.0f; });
    case ScalarPrim::select: return each(y, n, [&](int64_t i) { return x[i] != 0.0f ? z[i] : w[i]; });
    case ScalarPrim::cast: return each(y, n, [&](int64_t i) { return x[i]; });  // to f32: the output's dtype
    case ScalarPrim::arg:
    case ScalarPrim::constant: break;
  }
  FSDPC_CHECK(false) << "scalar prim " << static_cast<int>(e.prim) << " in expr_kernel";
}

}  // namespace

FSDPC_CPU_KERNEL(expr_kernel) {
  const ScalarExpr* e = scalar_expr(b.op);
  FSDPC_CHECK(e) << op_name(b.op) << " has no scalar expression";
  const ElementwiseKind kind = elementwise_kind(b.op);
  for (size_t k = 0; k < in.size(); ++k) {
    if (b.inputs[k].is_scalar()) continue;
    const DType d = in[k].type->dtype;
    const bool ok = d == DType::f32 || (kind == ElementwiseKind::select && k == 0 && d == DType::boolean);
    if (!ok)
      fail("cpu_", op_name(b.op), ": input ", k, " is ", dtype_name(d),
           "; the CPU runs this op from its scalar expression in f32 only");
  }
  const bool to_bool = out[0].type->dtype == DType::boolean;
  const int64_t n = count_of(out[0]);
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  const Operands ops{&in, &b};
  FSDPC_CPU_PARALLEL_FOR(n)
  for (int64_t k = 0; k < blocks; ++k) {
    const int64_t base = k * kBlock, len = std::min(kBlock, n - base);
    float y[kBlock];
    eval_block(*e, ops, base, len, y);
    if (to_bool) {
      uint8_t* o = mdata<uint8_t>(out[0]) + base;
      for (int64_t i = 0; i < len; ++i) o[i] = y[i] != 0.0f;
    } else {
      std::memcpy(mdata<float>(out[0]) + base, y, static_cast<size_t>(len) * sizeof(float));
    }
  }
}

}  // namespace fsdpc::cpu
