// trace_to_mlir(): prints a trace as one func.func of textual MLIR: builtin
// arith/math ops where one fits, generic "fsdpc.*" ops everywhere else.
#include "passes/mlir.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <cctype>
#include <cstdio>
#include <optional>
#include <unordered_map>

#include "ir/error.h"

namespace fsdpc {

namespace {

bool plain_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

// MLIR string literal: printable ASCII as is, everything else as \XX.
std::string mlir_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      (out += '\\') += c;
    } else if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "\\%02X", u);
      out += buf;
    }
  }
  return out + "\"";
}

std::string element_type(DType d) {
  return d == DType::boolean ? "i1" : std::string(dtype_name(d));
}

std::string mlir_type(const TensorType& t) {
  std::string s = "tensor<";
  for (int64_t d : t.shape) s += std::to_string(d) + "x";
  s += element_type(t.dtype) + ">";
  return t.future ? "!fsdpc.future<" + s + ">" : s;
}

// The bit pattern MLIR reads for a non-finite float of dtype `d`.
std::string nonfinite_bits(double v, DType d) {
  char buf[32];
  const bool neg = std::signbit(v) && !std::isnan(v);
  switch (d) {
    case DType::f16:
      return std::isnan(v) ? "0x7E00" : neg ? "0xFC00" : "0x7C00";
    case DType::bf16:
      return std::isnan(v) ? "0x7FC0" : neg ? "0xFF80" : "0x7F80";
    case DType::f32:
      std::snprintf(buf, sizeof buf, "0x%08X", std::bit_cast<uint32_t>(static_cast<float>(v)));
      return buf;
    default:
      std::snprintf(buf, sizeof buf, "0x%016llX",
                    static_cast<unsigned long long>(std::bit_cast<uint64_t>(v)));
      return buf;
  }
}

// Shortest text that reads back as `v`; MLIR wants a '.' in a float literal.
std::string mlir_float(double v, DType d) {
  if (!std::isfinite(v)) return nonfinite_bits(v, d);
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  FSDPC_CHECK(ec == std::errc()) << "to_chars failed";
  std::string s(buf, end);
  if (s.find('.') == std::string::npos) {
    size_t e = s.find('e');
    s.insert(e == std::string::npos ? s.size() : e, ".0");
  }
  return s;
}

std::string int_list(const IntList& l) {
  std::string out = "[";
  for (size_t i = 0; i < l.size(); ++i) out += (i ? ", " : "") + std::to_string(l[i]) + " : i64";
  return out + "]";
}

std::string attr_value(const AttrValue& v) {
  struct Visitor {
    std::string operator()(int64_t i) const { return std::to_string(i) + " : i64"; }
    std::string operator()(double d) const { return mlir_float(d, DType::f64) + " : f64"; }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(const std::string& s) const { return mlir_string(s); }
    std::string operator()(const IntList& l) const { return int_list(l); }
    std::string operator()(const IntLists& ls) const {
      std::string out = "[";
      for (size_t i = 0; i < ls.size(); ++i) out += (i ? ", " : "") + int_list(ls[i]);
      return out + "]";
    }
  };
  return std::visit(Visitor{}, v);
}

std::string attr_dict(const Attrs& attrs) {
  if (attrs.empty()) return "";
  std::string out = " {";
  bool first = true;
  for (const auto& [key, value] : attrs.items()) {
    out += first ? "" : ", ";
    first = false;
    out += (plain_identifier(key) ? key : mlir_string(key)) + " = " + attr_value(value);
  }
  return out + "}";
}

// An elementwise op's arith/math spelling; `compare` ops take a predicate.
// Only the ops with one MLIR op of their own are named; any other is printed
// generically, so a new elementwise op needs no line here.
struct Builtin {
  std::string name;
  std::string predicate;  // cmpf/cmpi only
};

std::optional<Builtin> float_builtin(OpId op) {
  if (op == OpId::Neg) return Builtin{"arith.negf", ""};
  if (op == OpId::Exp) return Builtin{"math.exp", ""};
  if (op == OpId::Log) return Builtin{"math.log", ""};
  if (op == OpId::Tanh) return Builtin{"math.tanh", ""};
  if (op == OpId::Sqrt) return Builtin{"math.sqrt", ""};
  if (op == OpId::Rsqrt) return Builtin{"math.rsqrt", ""};
  if (op == OpId::Sin) return Builtin{"math.sin", ""};
  if (op == OpId::Cos) return Builtin{"math.cos", ""};
  if (op == OpId::Add) return Builtin{"arith.addf", ""};
  if (op == OpId::Sub) return Builtin{"arith.subf", ""};
  if (op == OpId::Mul) return Builtin{"arith.mulf", ""};
  if (op == OpId::Div) return Builtin{"arith.divf", ""};
  if (op == OpId::Pow) return Builtin{"math.powf", ""};
  if (op == OpId::Maximum) return Builtin{"arith.maxf", ""};
  if (op == OpId::Eq) return Builtin{"arith.cmpf", "oeq"};
  if (op == OpId::Ne) return Builtin{"arith.cmpf", "une"};
  if (op == OpId::Lt) return Builtin{"arith.cmpf", "olt"};
  if (op == OpId::Le) return Builtin{"arith.cmpf", "ole"};
  if (op == OpId::Gt) return Builtin{"arith.cmpf", "ogt"};
  if (op == OpId::Ge) return Builtin{"arith.cmpf", "oge"};
  return std::nullopt;
}

std::optional<Builtin> int_builtin(OpId op, bool boolean) {
  // Booleans only compare equal or not.
  if (op == OpId::Eq) return Builtin{"arith.cmpi", "eq"};
  if (op == OpId::Ne) return Builtin{"arith.cmpi", "ne"};
  if (boolean) return std::nullopt;
  if (op == OpId::Add) return Builtin{"arith.addi", ""};
  if (op == OpId::Sub) return Builtin{"arith.subi", ""};
  if (op == OpId::Mul) return Builtin{"arith.muli", ""};
  if (op == OpId::Div) return Builtin{"arith.divsi", ""};
  if (op == OpId::Maximum) return Builtin{"arith.maxsi", ""};
  if (op == OpId::Lt) return Builtin{"arith.cmpi", "slt"};
  if (op == OpId::Le) return Builtin{"arith.cmpi", "sle"};
  if (op == OpId::Gt) return Builtin{"arith.cmpi", "sgt"};
  if (op == OpId::Ge) return Builtin{"arith.cmpi", "sge"};
  return std::nullopt;
}

bool is_compare(OpId op) {
  return op == OpId::Eq || op == OpId::Ne || op == OpId::Lt || op == OpId::Le ||
         op == OpId::Gt || op == OpId::Ge;
}

// An operand as MLIR sees it: its SSA name and type.
struct Value {
  std::string ssa;
  TensorType type;
};

// Emits the body statement by statement, keeping every value's SSA name.
class Emitter {
 public:
  explicit Emitter(const Trace& trace) : trace_(trace) {}
  std::string run();

 private:
  std::string ssa_name(const std::string& name);
  void define(const Proxy& p, const std::string& ssa) { values_[p.name] = {ssa, p.type}; }
  Value use(const std::string& name) const;
  Value literal(double v, TensorType like, const std::string& ssa);
  void statement(const BoundSymbol& b);
  bool try_builtin(const BoundSymbol& b, const std::vector<Value>& ins, const std::string& out);
  std::string header();
  std::string return_line() const;

  const Trace& trace_;
  std::unordered_map<std::string, Value> values_;
  int64_t renamed_ = 0;
  std::string body_;
};

// Trace names are kept; one MLIR cannot spell becomes v.<n>, which no trace
// name (no '.') and no literal (.c<i>) can equal.
std::string Emitter::ssa_name(const std::string& name) {
  return "%" + (plain_identifier(name) ? name : "v." + std::to_string(renamed_++));
}

Value Emitter::use(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) fail("mlir: ", name, " is used but not defined");
  return it->second;
}

// `%<out>.c<i> = arith.constant dense<v>` of the operand's type, or of f64
// when that dtype cannot hold v exactly (then the op stays generic).
Value Emitter::literal(double v, TensorType like, const std::string& ssa) {
  like.future = false;
  std::string text;
  if (is_float(like.dtype)) {
    text = mlir_float(v, like.dtype);
  } else if (like.dtype == DType::boolean && (v == 0 || v == 1)) {
    text = v == 1 ? "true" : "false";
  } else if (is_integer(like.dtype) && v == std::trunc(v) && std::abs(v) < 0x1p62) {
    text = std::to_string(static_cast<int64_t>(v));
  } else {
    like.dtype = DType::f64;
    text = mlir_float(v, DType::f64);
  }
  body_ += "  " + ssa + " = arith.constant dense<" + text + "> : " + mlir_type(like) + "\n";
  return Value{ssa, like};
}

bool Emitter::try_builtin(const BoundSymbol& b, const std::vector<Value>& ins,
                          const std::string& out) {
  if (op_info(b.op).category != OpCategory::elementwise || b.outputs.size() != 1 ||
      !b.attrs.empty() || ins.empty())
    return false;
  const TensorType& result = b.outputs[0].type;
  if (b.op == OpId::Where) {
    TensorType cond = result;
    cond.dtype = DType::boolean;
    if (ins.size() != 3 || mlir_type(ins[0].type) != mlir_type(cond) ||
        mlir_type(ins[1].type) != mlir_type(result) || mlir_type(ins[2].type) != mlir_type(result))
      return false;
    body_ += "  " + out + " = arith.select " + ins[0].ssa + ", " + ins[1].ssa + ", " +
             ins[2].ssa + " : " + mlir_type(cond) + ", " + mlir_type(result) + "\n";
    return true;
  }
  const TensorType& operand = ins[0].type;
  for (const Value& v : ins)
    if (mlir_type(v.type) != mlir_type(operand) || v.type.future) return false;
  TensorType expected = operand;
  if (is_compare(b.op)) expected.dtype = DType::boolean;
  if (mlir_type(expected) != mlir_type(result)) return false;
  std::optional<Builtin> op = is_float(operand.dtype)
                                  ? float_builtin(b.op)
                                  : int_builtin(b.op, operand.dtype == DType::boolean);
  if (!op) return false;
  std::string line = "  " + out + " = " + op->name + " ";
  if (!op->predicate.empty()) line += op->predicate + ", ";
  for (size_t i = 0; i < ins.size(); ++i) line += (i ? ", " : "") + ins[i].ssa;
  body_ += line + " : " + mlir_type(operand) + "\n";
  return true;
}

void Emitter::statement(const BoundSymbol& b) {
  std::vector<std::string> outs;
  for (const Proxy& p : b.outputs) outs.push_back(ssa_name(p.name));
  std::vector<Value> ins;
  for (size_t i = 0; i < b.inputs.size(); ++i) {
    const Operand& in = b.inputs[i];
    if (!in.is_scalar()) {
      ins.push_back(use(in.name));
      continue;
    }
    // A literal takes its tensor operand's type: the result's, or for a
    // comparison (bool result) the other operand's.
    TensorType like = b.outputs.empty() ? TensorType{} : b.outputs[0].type;
    if (is_compare(b.op) && b.inputs.size() == 2 && !b.inputs[1 - i].is_scalar())
      like = use(b.inputs[1 - i].name).type;
    const std::string base = outs.empty() ? "%lit" : outs[0];
    ins.push_back(literal(*in.scalar, like, base + ".c" + std::to_string(i)));
  }
  if (outs.size() != 1 || !try_builtin(b, ins, outs[0])) {
    std::string line = "  ";
    for (size_t i = 0; i < outs.size(); ++i) line += (i ? ", " : "") + outs[i];
    if (!outs.empty()) line += " = ";
    line += "\"fsdpc." + std::string(op_name(b.op)) + "\"(";
    for (size_t i = 0; i < ins.size(); ++i) line += (i ? ", " : "") + ins[i].ssa;
    line += ")" + attr_dict(b.attrs) + " : (";
    for (size_t i = 0; i < ins.size(); ++i) line += (i ? ", " : "") + mlir_type(ins[i].type);
    line += ") -> ";
    if (b.outputs.size() != 1) line += "(";
    for (size_t i = 0; i < b.outputs.size(); ++i)
      line += (i ? ", " : "") + mlir_type(b.outputs[i].type);
    if (b.outputs.size() != 1) line += ")";
    body_ += line + "\n";
  }
  for (size_t i = 0; i < outs.size(); ++i) define(b.outputs[i], outs[i]);
}

std::string Emitter::header() {
  std::string out = "func.func @" + (plain_identifier(trace_.name) ? trace_.name
                                                                    : mlir_string(trace_.name));
  out += "(";
  for (size_t i = 0; i < trace_.args.size(); ++i) {
    const Proxy& a = trace_.args[i];
    const std::string ssa = ssa_name(a.name);
    define(a, ssa);
    out += (i ? ", " : "") + ssa + ": " + mlir_type(a.type);
    std::vector<std::string> attrs;
    if (a.is_param()) attrs.push_back("fsdpc.param = " + mlir_string(a.param_path));
    if (a.is_param() && !a.requires_grad) attrs.push_back("fsdpc.frozen");
    if (a.type.dist != DistType::none)
      attrs.push_back("fsdpc.dist = " + mlir_string(std::string(dist_name(a.type.dist))));
    if (a.type.device.kind != DeviceKind::cpu)
      attrs.push_back("fsdpc.device = " + mlir_string(device_name(a.type.device)));
    for (size_t k = 0; k < attrs.size(); ++k) out += (k ? ", " : " {") + attrs[k];
    if (!attrs.empty()) out += "}";
  }
  return out + ")";
}

std::string Emitter::return_line() const {
  std::vector<std::string> names;
  trace_.returns.collect_names(names);
  std::string values, types;
  for (size_t i = 0; i < names.size(); ++i) {
    const Value v = use(names[i]);
    values += (i ? ", " : " ") + v.ssa;
    types += (i ? ", " : " : ") + mlir_type(v.type);
  }
  return "  func.return" + values + types + "\n";
}

std::string Emitter::run() {
  std::string out = header();
  for (const BoundSymbol& b : trace_.bsyms) statement(b);
  // The result types are known once the body has defined every value.
  std::vector<std::string> names;
  trace_.returns.collect_names(names);
  if (!names.empty()) out += names.size() == 1 ? " -> " : " -> (";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + mlir_type(use(names[i]).type);
  if (names.size() > 1) out += ")";
  return out + " {\n" + body_ + return_line() + "}\n";
}

}  // namespace

std::string trace_to_mlir(const Trace& trace) {
  std::string out = "// fsdpc trace '" + trace.name + "'";
  if (!trace.provenance.empty()) out += ", constructed by " + trace.provenance;
  for (char& c : out)  // one comment line, whatever the names hold
    if (c == '\n' || c == '\r') c = ' ';
  return out + "\n" + Emitter(trace).run();
}

}  // namespace fsdpc
