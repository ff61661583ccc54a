// Parses ir/scalar_exprs.def: `name(args...)`, the input names a b c, and
// number literals. A malformed row is a bug in the table, so it aborts.
#include "ir/scalar_expr.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ir/error.h"

namespace fsdpc {

namespace {

struct PrimName {
  std::string_view name;
  ScalarPrim prim;
  size_t arity;
};

constexpr std::array<PrimName, 20> kPrims = {{
    {"neg", ScalarPrim::neg, 1},   {"exp", ScalarPrim::exp, 1},  {"log", ScalarPrim::log, 1},
    {"tanh", ScalarPrim::tanh, 1}, {"sqrt", ScalarPrim::sqrt, 1}, {"add", ScalarPrim::add, 2},
    {"sub", ScalarPrim::sub, 2},   {"mul", ScalarPrim::mul, 2},  {"div", ScalarPrim::div, 2},
    {"pow", ScalarPrim::pow, 2},   {"max", ScalarPrim::max, 2},  {"eq", ScalarPrim::eq, 2},
    {"ne", ScalarPrim::ne, 2},     {"lt", ScalarPrim::lt, 2},    {"le", ScalarPrim::le, 2},
    {"gt", ScalarPrim::gt, 2},     {"ge", ScalarPrim::ge, 2},    {"select", ScalarPrim::select, 3},
    {"sin", ScalarPrim::sin, 1},   {"cos", ScalarPrim::cos, 1},
}};

class ExprParser {
 public:
  explicit ExprParser(std::string_view text) : s_(text) {}

  ScalarExpr parse_all() {
    ScalarExpr e = parse();
    skip_space();
    FSDPC_CHECK(i_ == s_.size()) << "scalar_exprs.def: trailing text in '" << s_ << "'";
    return e;
  }

 private:
  void skip_space() {
    while (i_ < s_.size() && s_[i_] == ' ') ++i_;
  }

  ScalarExpr parse() {
    skip_space();
    FSDPC_CHECK(i_ < s_.size()) << "scalar_exprs.def: '" << s_ << "' ends early";
    ScalarExpr e;
    if (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-' || s_[i_] == '.') {
      const std::string rest(s_.substr(i_));
      char* end = nullptr;
      e.value = std::strtod(rest.c_str(), &end);
      i_ += static_cast<size_t>(end - rest.c_str());
      return e;
    }
    size_t start = i_;
    while (i_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[i_]))) ++i_;
    const std::string_view word = s_.substr(start, i_ - start);
    if (word.size() == 1 && word[0] >= 'a' && word[0] <= 'c') {
      e.prim = ScalarPrim::arg;
      e.arg = word[0] - 'a';
      return e;
    }
    size_t arity = 1;
    if (word == "cast") {
      e.prim = ScalarPrim::cast;
    } else {
      const PrimName* found = nullptr;
      for (const PrimName& p : kPrims)
        if (p.name == word) found = &p;
      FSDPC_CHECK(found) << "scalar_exprs.def: unknown prim '" << word << "' in '" << s_ << "'";
      e.prim = found->prim;
      arity = found->arity;
    }
    expect('(');
    for (size_t k = 0; k < arity; ++k) {
      if (k) expect(',');
      e.children.push_back(parse());
    }
    expect(')');
    return e;
  }

  void expect(char c) {
    skip_space();
    FSDPC_CHECK(i_ < s_.size() && s_[i_] == c) << "scalar_exprs.def: expected '" << c << "' in '" << s_ << "'";
    ++i_;
  }

  std::string_view s_;
  size_t i_ = 0;
};

// The highest input index `e` reads (-1: none).
int largest_arg(const ScalarExpr& e) {
  int k = e.prim == ScalarPrim::arg ? e.arg : -1;
  for (const ScalarExpr& c : e.children) k = std::max(k, largest_arg(c));
  return k;
}

struct Table {
  std::vector<const ScalarExpr*> definition;  // by op
  std::vector<const ScalarExpr*> kernel;      // by op
  std::vector<ScalarExpr> storage;
};

const Table& table() {
  static const Table t = [] {
    Table out;
    out.definition.assign(static_cast<size_t>(kNumOps), nullptr);
    out.kernel.assign(static_cast<size_t>(kNumOps), nullptr);
    struct Row {
      OpId op;
      bool kernel;
      std::string_view text;
    };
    const std::vector<Row> rows = {
#define FSDPC_SCALAR_EXPR(op, text) {OpId::op, false, text},
#define FSDPC_SCALAR_KERNEL(op, text) {OpId::op, true, text},
#include "ir/scalar_exprs.def"
#undef FSDPC_SCALAR_KERNEL
#undef FSDPC_SCALAR_EXPR
    };
    out.storage.reserve(rows.size());  // the pointers below stay valid
    for (const Row& r : rows) {
      out.storage.push_back(ExprParser(r.text).parse_all());
      const auto i = static_cast<size_t>(r.op);
      std::vector<const ScalarExpr*>& slot = r.kernel ? out.kernel : out.definition;
      FSDPC_CHECK(!slot[i]) << "scalar_exprs.def: two rows for " << op_name(r.op);
      slot[i] = &out.storage.back();
    }
    // Every elementwise op of ops.def is defined here, over no more inputs
    // than it takes.
    for (size_t i = 0; i < out.kernel.size(); ++i) {
      const OpId op = static_cast<OpId>(i);
      const OpInfo& info = op_info(op);
      FSDPC_CHECK(!out.definition[i] == (info.category != OpCategory::elementwise))
          << "scalar_exprs.def: " << op_name(op) << (out.definition[i] ? " is not elementwise" : " has no row");
      FSDPC_CHECK(!out.kernel[i] || out.definition[i])
          << "scalar_exprs.def: a kernel formulation of " << op_name(op) << " without its definition";
      if (!out.kernel[i]) out.kernel[i] = out.definition[i];
      for (const ScalarExpr* e : {out.definition[i], out.kernel[i]})
        FSDPC_CHECK(!e || largest_arg(*e) < info.max_inputs)
            << "scalar_exprs.def: " << op_name(op) << " reads an input it does not take";
    }
    return out;
  }();
  return t;
}

}  // namespace

const ScalarExpr* scalar_expr(OpId op) { return table().kernel.at(static_cast<size_t>(op)); }

const ScalarExpr* scalar_definition(OpId op) { return table().definition.at(static_cast<size_t>(op)); }

double nan_max(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return a > b ? a : b;
}

double eval_scalar(const ScalarExpr& e, const double* args) {
  auto at = [&](size_t k) { return eval_scalar(e.children[k], args); };
  switch (e.prim) {
    case ScalarPrim::arg: return args[e.arg];
    case ScalarPrim::constant: return e.value;
    case ScalarPrim::neg: return -at(0);
    case ScalarPrim::exp: return std::exp(at(0));
    case ScalarPrim::log: return std::log(at(0));
    case ScalarPrim::tanh: return std::tanh(at(0));
    case ScalarPrim::sqrt: return std::sqrt(at(0));
    case ScalarPrim::sin: return std::sin(at(0));
    case ScalarPrim::cos: return std::cos(at(0));
    case ScalarPrim::add: return at(0) + at(1);
    case ScalarPrim::sub: return at(0) - at(1);
    case ScalarPrim::mul: return at(0) * at(1);
    case ScalarPrim::div: return at(0) / at(1);
    case ScalarPrim::pow: return std::pow(at(0), at(1));
    case ScalarPrim::max: return nan_max(at(0), at(1));
    case ScalarPrim::eq: return at(0) == at(1);
    case ScalarPrim::ne: return at(0) != at(1);
    case ScalarPrim::lt: return at(0) < at(1);
    case ScalarPrim::le: return at(0) <= at(1);
    case ScalarPrim::gt: return at(0) > at(1);
    case ScalarPrim::ge: return at(0) >= at(1);
    case ScalarPrim::select: return at(0) != 0.0 ? at(1) : at(2);
    case ScalarPrim::cast: return at(0);
  }
  FSDPC_CHECK(false) << "scalar prim " << static_cast<int>(e.prim) << " outside ScalarPrim";
  return 0.0;
}

bool runs_generated(OpId op, DType out) {
  switch (elementwise_kind(op)) {
    case ElementwiseKind::unary:
    case ElementwiseKind::binary:
    case ElementwiseKind::select: return out == DType::f32;
    case ElementwiseKind::compare: return out == DType::boolean;
    case ElementwiseKind::cast:
    case ElementwiseKind::none: break;
  }
  return false;
}

ElementwiseKind elementwise_kind(OpId op) {
  const ScalarExpr* e = scalar_definition(op);
  if (!e) return ElementwiseKind::none;
  if (e->prim == ScalarPrim::cast) return ElementwiseKind::cast;
  if (is_comparison(e->prim)) return ElementwiseKind::compare;
  if (e->prim == ScalarPrim::select && op_info(op).min_inputs == 3) return ElementwiseKind::select;
  return op_info(op).min_inputs == 1 ? ElementwiseKind::unary : ElementwiseKind::binary;
}

bool is_comparison(ScalarPrim p) {
  switch (p) {
    case ScalarPrim::eq: case ScalarPrim::ne: case ScalarPrim::lt:
    case ScalarPrim::le: case ScalarPrim::gt: case ScalarPrim::ge:
      return true;
    default:
      return false;
  }
}

}  // namespace fsdpc
