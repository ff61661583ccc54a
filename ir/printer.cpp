// The canonical text form of a trace (docs/design.md "Text form"): deterministic,
// Thunder-like Python, and exactly what ir/parser.cpp reads back.
#include "ir/printer.h"

#include <charconv>
#include <cmath>

#include "ir/error.h"
#include "ir/text_lexer.h"

namespace fsdpc {

namespace {

// A string attribute prints bare only when the parser cannot mistake it for
// another kind of value (a bool, a float keyword) or split it.
bool prints_bare(const std::string& s) {
  if (s.empty() || !is_ident_start_char(s[0])) return false;
  for (char c : s)
    if (!is_ident_char(c)) return false;
  return s != "True" && s != "False" && s != "inf" && s != "nan";
}

// Parameter paths are module paths ("h.0.ln_1.weight"), bare in the common case.
bool path_prints_bare(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!is_ident_char(c) && c != '.') return false;
  return true;
}

std::string quote(const std::string& s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        // Other control bytes would break the line structure or hide in a
        // terminal, so they are spelled out.
        if (u < 0x20 || u == 0x7f) {
          out += "\\x";
          out += kHex[u >> 4];
          out += kHex[u & 0xf];
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string int_list_str(const IntList& l) {
  std::string out = "[";
  for (size_t i = 0; i < l.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(l[i]);
  }
  return out + "]";
}

std::string attr_value_str(const AttrValue& v) {
  struct Visitor {
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return format_double(d); }
    std::string operator()(bool b) const { return b ? "True" : "False"; }
    std::string operator()(const std::string& s) const { return prints_bare(s) ? s : quote(s); }
    std::string operator()(const IntList& l) const { return int_list_str(l); }
    std::string operator()(const IntLists& ls) const {
      std::string out = "[";
      for (size_t i = 0; i < ls.size(); ++i) {
        if (i) out += ", ";
        out += int_list_str(ls[i]);
      }
      return out + "]";
    }
  };
  return std::visit(Visitor{}, v);
}

std::string type_comment_entry(const Proxy& p) {
  std::string out = p.name + ": \"" + type_str(p.type) + "\"";
  if (p.type.dist != DistType::none) {
    out += ' ';
    out += dist_name(p.type.dist);
  }
  return out;
}

// `del t5, t7` reads like Python's del; a del that the short form cannot
// carry (attributes, literals, outputs, no names) falls back to the call form,
// which the parser also reads, so printing stays lossless.
bool prints_as_del_statement(const BoundSymbol& b) {
  if (b.op != OpId::Del || b.inputs.empty() || !b.outputs.empty() || !b.attrs.empty())
    return false;
  for (const Operand& in : b.inputs)
    if (in.is_scalar()) return false;
  return true;
}

// `<outs> = <op>(<inputs>, <attrs>)  # <types>`, without indent. A fusion
// region's name carries its number in the trace (`cpu_fusion3`, -1: none).
std::string statement_str(const BoundSymbol& b, int region = -1) {
  std::string out;
  if (prints_as_del_statement(b)) {
    out = "del ";
    for (size_t i = 0; i < b.inputs.size(); ++i) out += (i ? ", " : "") + b.inputs[i].name;
    return out;
  }
  for (size_t i = 0; i < b.outputs.size(); ++i) {
    if (i) out += ", ";
    out += b.outputs[i].name;
  }
  if (!b.outputs.empty()) out += " = ";
  out += symbol_name(b.op, b.executor);
  if (b.op == OpId::Fusion && region >= 0) out += std::to_string(region);
  out += '(';
  bool first = true;
  auto sep = [&] {
    if (!first) out += ", ";
    first = false;
  };
  for (const Operand& in : b.inputs) {
    sep();
    out += in.is_scalar() ? format_double(*in.scalar) : in.name;
  }
  for (const auto& [key, value] : b.attrs.items()) {
    sep();
    out += key + "=" + attr_value_str(value);
  }
  out += ')';
  for (size_t i = 0; i < b.outputs.size(); ++i) {
    out += i ? ", " : "  # ";
    out += type_comment_entry(b.outputs[i]);
  }
  return out;
}

void print_subsymbols(const std::vector<BoundSymbol>& subs, int depth, std::string& out) {
  for (const BoundSymbol& s : subs) {
    out += std::string(2 + 2 * depth, ' ') + "# " + statement_str(s) + "\n";
    print_subsymbols(s.subsymbols, depth + 1, out);
  }
}

std::string arg_comment(const Proxy& a) {
  std::string out = "  # " + type_comment_entry(a);
  if (a.is_param()) {
    out += " param=";
    out += path_prints_bare(a.param_path) ? a.param_path : quote(a.param_path);
    if (!a.requires_grad) out += " frozen";
  }
  return out;
}

std::string return_str(const ReturnTree& r) {
  if (!r.is_tuple) return r.name;
  std::string out = "(";
  for (size_t i = 0; i < r.items.size(); ++i) {
    if (i) out += ", ";
    out += return_str(r.items[i]);
  }
  if (r.items.size() == 1) out += ',';
  return out + ")";
}

// Python's `return a, b`: the outer tuple of two or more needs no parentheses.
std::string top_return_str(const ReturnTree& r) {
  if (!r.is_tuple || r.items.size() < 2) return return_str(r);
  std::string out;
  for (size_t i = 0; i < r.items.size(); ++i) {
    if (i) out += ", ";
    out += return_str(r.items[i]);
  }
  return out;
}

}  // namespace

std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  FSDPC_CHECK(ec == std::errc()) << "to_chars failed";
  std::string out(buf, end);
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

std::string print_trace(const Trace& trace) {
  std::string out;
  if (!trace.provenance.empty()) out += "# Constructed by " + trace.provenance + "\n";
  out += "def " + trace.name + "(";
  for (size_t i = 0; i < trace.args.size(); ++i) {
    if (i) out += ", ";
    out += trace.args[i].name;
  }
  out += "):\n";
  for (const Proxy& a : trace.args) out += arg_comment(a) + "\n";
  int regions = 0;
  for (const BoundSymbol& b : trace.bsyms) {
    out += "  " + statement_str(b, b.op == OpId::Fusion ? regions++ : -1) + "\n";
    print_subsymbols(b.subsymbols, 1, out);
  }
  out += "  return " + top_return_str(trace.returns) + "\n";
  return out;
}

}  // namespace fsdpc
