// Parses ir/scalar_exprs.def: `name(args...)`, the input names a b c, and
// number literals. A malformed row is a bug in the table, so it aborts.
#include "ir/scalar_expr.h"

#include <array>
#include <cctype>
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

struct Table {
  std::vector<const ScalarExpr*> by_op;
  std::vector<ScalarExpr> storage;
};

const Table& table() {
  static const Table t = [] {
    Table out;
    out.by_op.assign(static_cast<size_t>(kNumOps), nullptr);
    std::vector<std::pair<OpId, std::string_view>> rows = {
#define FSDPC_SCALAR_EXPR(op, text) {OpId::op, text},
#include "ir/scalar_exprs.def"
#undef FSDPC_SCALAR_EXPR
    };
    out.storage.reserve(rows.size());
    for (const auto& [op, text] : rows) {
      out.storage.push_back(ExprParser(text).parse_all());
      out.by_op[static_cast<size_t>(op)] = &out.storage.back();
    }
    return out;
  }();
  return t;
}

}  // namespace

const ScalarExpr* scalar_expr(OpId op) { return table().by_op.at(static_cast<size_t>(op)); }

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
