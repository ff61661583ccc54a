// VJP rules of the elementwise ops. Either operand of a binary op may be a
// scalar literal: it gets no cotangent but still enters the other's formula.
#include <cmath>

#include "ir/error.h"
#include "passes/vjp_rules_util.h"

namespace fsdpc::vjp_detail {

namespace {

// Input i as an operand: the proxy's name or the literal itself.
Operand operand(const VjpCall& c, size_t i) { return c.bsym.inputs[i]; }

Proxy emit(const VjpCall& c, OpId id, Operand x, Operand y) { return c.b.emit1(id, {x, y}); }

// d(a^p)/da = p * a^(p-1), spelled out for the common constant exponents;
// p = 0 gives 0 everywhere, as PyTorch does, even where a^-1 is infinite.
Proxy pow_base_grad(const VjpCall& c, const Proxy& a) {
  TraceBuilder& b = c.b;
  const Proxy& g = c.g();
  if (!c.is_scalar(1)) {
    const Proxy p = c.in(1);
    Proxy d = binary(b, OpId::Mul, binary(b, OpId::Pow, a, binary(b, OpId::Sub, p, 1.0)), p);
    return binary(b, OpId::Mul, g, d);
  }
  const double p = c.scalar(1);
  if (p == 0.0) return zeros(b, g.type);
  if (p == 1.0) return g;
  if (p == 2.0) return binary(b, OpId::Mul, g, binary(b, OpId::Mul, a, 2.0));
  return binary(b, OpId::Mul, g, binary(b, OpId::Mul, binary(b, OpId::Pow, a, p - 1.0), p));
}

// d(a^p)/dp = a^p * log(a) = y * log(a).
Proxy pow_exponent_grad(const VjpCall& c) {
  TraceBuilder& b = c.b;
  Proxy gy = binary(b, OpId::Mul, c.g(), c.out());
  if (c.is_scalar(0)) return binary(b, OpId::Mul, gy, std::log(c.scalar(0)));
  return binary(b, OpId::Mul, gy, unary(b, OpId::Log, c.in(0)));
}

// PyTorch's maximum: the larger input takes the cotangent; on a tie each
// takes half.
Cotangents maximum_rule(const VjpCall& c) {
  TraceBuilder& b = c.b;
  const Proxy& g = c.g();
  const Operand x = operand(c, 0), y = operand(c, 1);
  Proxy tie = emit(c, OpId::Eq, x, y);
  Proxy half = where(b, tie, op(binary(b, OpId::Mul, g, 0.5)), Operand::lit(0.0));
  Cotangents r = c.none();
  if (c.need(0)) r[0] = where(b, emit(c, OpId::Gt, x, y), op(g), op(half));
  if (c.need(1)) r[1] = where(b, emit(c, OpId::Lt, x, y), op(g), op(half));
  return r;
}

Cotangents where_rule(const VjpCall& c) {
  Cotangents r = c.none();
  const Proxy cond = c.in(0);
  const Operand g = op(c.g()), zero = Operand::lit(0.0);
  if (c.need(1)) r[1] = where(c.b, cond, g, zero);
  if (c.need(2)) r[2] = where(c.b, cond, zero, g);
  return r;
}

}  // namespace

// One case per elementwise op: its rule. The other sections of the op table
// never reach here (vjp() dispatches by category). A unary formula uses the
// forward output y where that is cheaper than x.
Cotangents vjp_elementwise(const VjpCall& c) {
  TraceBuilder& b = c.b;
  const Proxy& g = c.g();
  Cotangents r = c.none();
  if (op_info(c.bsym.op).max_inputs == 1 && !c.need(0)) return r;  // a unary op's input needs none
  switch (c.bsym.op) {
    case OpId::Neg: return {unary(b, OpId::Neg, g)};
    case OpId::Exp: return {binary(b, OpId::Mul, g, c.out())};
    case OpId::Log: return {binary(b, OpId::Div, g, c.in(0))};
    case OpId::Tanh: {  // 1 - tanh^2
      const Proxy& y = c.out();
      return {binary(b, OpId::Mul, g, binary(b, OpId::Sub, 1.0, binary(b, OpId::Mul, y, y)))};
    }
    case OpId::Sqrt:  // 1 / (2 sqrt(x))
      return {binary(b, OpId::Div, g, binary(b, OpId::Mul, c.out(), 2.0))};
    case OpId::Rsqrt: {  // -x^(-3/2) / 2 = -y^3 / 2
      const Proxy& y = c.out();
      Proxy y3 = binary(b, OpId::Mul, binary(b, OpId::Mul, y, y), y);
      return {binary(b, OpId::Mul, g, binary(b, OpId::Mul, y3, -0.5))};
    }
    case OpId::Sin: return {binary(b, OpId::Mul, g, unary(b, OpId::Cos, c.in(0)))};
    case OpId::Cos: return {binary(b, OpId::Mul, g, unary(b, OpId::Neg, unary(b, OpId::Sin, c.in(0))))};
    case OpId::Sigmoid: {  // y (1 - y)
      const Proxy& y = c.out();
      return {binary(b, OpId::Mul, g, binary(b, OpId::Mul, y, binary(b, OpId::Sub, 1.0, y)))};
    }
    case OpId::ConvertElementType:
      if (!is_float(c.in(0).type.dtype)) return r;
      return {convert(b, g, c.in(0).type.dtype)};
    case OpId::Add:
      if (c.need(0)) r[0] = g;
      if (c.need(1)) r[1] = g;
      return r;
    case OpId::Sub:
      if (c.need(0)) r[0] = g;
      if (c.need(1)) r[1] = unary(b, OpId::Neg, g);
      return r;
    case OpId::Mul:
      if (c.need(0)) r[0] = emit(c, OpId::Mul, op(g), operand(c, 1));
      if (c.need(1)) r[1] = emit(c, OpId::Mul, op(g), operand(c, 0));
      return r;
    case OpId::Div:  // d(a/b)/db = -a/b^2 = -(a/b)/b
      if (c.need(0)) r[0] = emit(c, OpId::Div, op(g), operand(c, 1));
      if (c.need(1))
        r[1] = unary(b, OpId::Neg, binary(b, OpId::Div, binary(b, OpId::Mul, g, c.out()), c.in(1)));
      return r;
    case OpId::Pow:
      if (c.need(0)) r[0] = pow_base_grad(c, c.in(0));
      if (c.need(1)) r[1] = pow_exponent_grad(c);
      return r;
    case OpId::Maximum: return maximum_rule(c);
    case OpId::Eq: case OpId::Ne: case OpId::Lt: case OpId::Le: case OpId::Gt: case OpId::Ge:
      return r;  // bool outputs carry no cotangent
    case OpId::Where: return where_rule(c);
    FSDPC_CASES_EXCEPT_ELEMENTWISE
      break;
  }
  FSDPC_CHECK(false) << op_name(c.bsym.op) << " is not elementwise";
  return r;
}

}  // namespace fsdpc::vjp_detail
