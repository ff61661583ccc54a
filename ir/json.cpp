// JSON form of a trace, for tools that do not want to parse the text form.
// Schema (version 1; optional keys are omitted at their default):
//   {"version": 1, "name": "computation", "provenance"?: "fsdp",
//    "args": [proxy...], "bsyms": [bsym...], "returns": "t2" | [ret...]}
//   proxy  = {"name", "device": "cpu", "dtype": "f32", "shape": [64, 64],
//             "dist"?: "replicated", "future"?: true, "param"?: "0.weight",
//             "requires_grad"?: false}
//   bsym   = {"op": "mul", "inputs": ["t0", {"scalar": 0.5}], "attrs"?: {...},
//             "outputs": [proxy...], "subsymbols"?: [bsym...]}
//   attrs keep their order; 2 is an int, 2.0 a float, [1, 2] an int list,
//   [[1], [2]] a list of int lists, {"int_lists": []} an empty one; floats
//   JSON cannot hold are {"float": "inf" | "-inf" | "nan"}.
#include "ir/json.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "ir/error.h"
#include "ir/printer.h"
#include "ir/text_lexer.h"

namespace fsdpc {

namespace {

using Json = nlohmann::ordered_json;

constexpr int kVersion = 1;
constexpr int kMaxSubsymbolDepth = 32;  // same caps as the text parser
constexpr int kMaxReturnDepth = 64;

// ---- writing --------------------------------------------------------------

Json double_to_json(double v) {
  if (std::isfinite(v)) return v;
  return Json{{"float", format_double(v)}};
}

Json attr_to_json(const AttrValue& v) {
  struct Visitor {
    Json operator()(int64_t i) const { return i; }
    Json operator()(double d) const { return double_to_json(d); }
    Json operator()(bool b) const { return b; }
    Json operator()(const std::string& s) const { return s; }
    Json operator()(const IntList& l) const { return l; }
    Json operator()(const IntLists& ls) const {
      // `[]` reads back as an empty IntList, so the empty IntLists is tagged.
      if (ls.empty()) return Json{{"int_lists", Json::array()}};
      return ls;
    }
  };
  return std::visit(Visitor{}, v);
}

Json proxy_to_json(const Proxy& p) {
  Json j;
  j["name"] = p.name;
  j["device"] = device_name(p.type.device);
  j["dtype"] = std::string(dtype_name(p.type.dtype));
  j["shape"] = p.type.shape;
  if (p.type.dist != DistType::none) j["dist"] = std::string(dist_name(p.type.dist));
  if (p.type.future) j["future"] = true;
  if (p.is_param()) j["param"] = p.param_path;
  if (!p.requires_grad) j["requires_grad"] = false;
  return j;
}

Json bsym_to_json(const BoundSymbol& b) {
  Json j;
  j["op"] = std::string(op_name(b.op));
  if (!b.executor.empty()) j["executor"] = b.executor;
  Json inputs = Json::array();
  for (const Operand& in : b.inputs)
    inputs.push_back(in.is_scalar() ? Json{{"scalar", double_to_json(*in.scalar)}} : Json(in.name));
  j["inputs"] = std::move(inputs);
  if (!b.attrs.empty()) {
    Json attrs = Json::object();
    for (const auto& [key, value] : b.attrs.items()) attrs[key] = attr_to_json(value);
    j["attrs"] = std::move(attrs);
  }
  Json outputs = Json::array();
  for (const Proxy& p : b.outputs) outputs.push_back(proxy_to_json(p));
  j["outputs"] = std::move(outputs);
  if (!b.subsymbols.empty()) {
    Json subs = Json::array();
    for (const BoundSymbol& s : b.subsymbols) subs.push_back(bsym_to_json(s));
    j["subsymbols"] = std::move(subs);
  }
  return j;
}

Json returns_to_json(const ReturnTree& r) {
  if (!r.is_tuple) return r.name;
  Json items = Json::array();
  for (const ReturnTree& item : r.items) items.push_back(returns_to_json(item));
  return items;
}

// ---- reading --------------------------------------------------------------

bool is_identifier(const std::string& s) {
  if (s.empty() || !is_ident_start_char(s[0])) return false;
  for (char c : s)
    if (!is_ident_char(c)) return false;
  return true;
}

// Walks the document; every error names the JSON path of the bad value.
class Reader {
 public:
  explicit Reader(std::string_view file) : file_(file) {}
  Trace trace(const Json& j);

 private:
  template <class... Parts>
  [[noreturn]] void error(const std::string& path, const Parts&... parts) const {
    fail(file_, ": ", path.empty() ? "(top level)" : path, ": ", parts...);
  }
  void check_keys(const Json& j, const std::string& path, std::initializer_list<const char*> keys);
  const Json& field(const Json& j, const std::string& path, const char* key);
  std::string string(const Json& j, const std::string& path);
  std::string name(const Json& j, const std::string& path);
  int64_t integer(const Json& j, const std::string& path);
  double number(const Json& j, const std::string& path);
  Proxy proxy(const Json& j, const std::string& path);
  Operand operand(const Json& j, const std::string& path);
  AttrValue attr(const Json& j, const std::string& path);
  IntList int_list(const Json& j, const std::string& path);
  BoundSymbol bsym(const Json& j, const std::string& path, int depth);
  ReturnTree returns(const Json& j, const std::string& path, int depth);
  void check_arity(const BoundSymbol& b, const std::string& path);

  std::string_view file_;
};

void Reader::check_keys(const Json& j, const std::string& path,
                        std::initializer_list<const char*> keys) {
  if (!j.is_object()) error(path, "expected an object");
  for (const auto& item : j.items()) {
    bool known = false;
    for (const char* k : keys) known = known || item.key() == k;
    if (!known) error(path, "unknown key '", item.key(), "'");
  }
}

const Json& Reader::field(const Json& j, const std::string& path, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) error(path, "missing key '", key, "'");
  return *it;
}

std::string Reader::string(const Json& j, const std::string& path) {
  if (!j.is_string()) error(path, "expected a string");
  return j.get<std::string>();
}

// Value names must survive the text form, so they follow its rules.
std::string Reader::name(const Json& j, const std::string& path) {
  std::string s = string(j, path);
  if (!is_identifier(s) || s == "inf" || s == "nan" || s == "return")
    error(path, "'", s,
          "' is not a valid name (expected an identifier other than inf, nan, return)");
  return s;
}

int64_t Reader::integer(const Json& j, const std::string& path) {
  if (j.is_number_unsigned()) {
    if (j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      error(path, "integer out of range");
    return static_cast<int64_t>(j.get<uint64_t>());
  }
  if (!j.is_number_integer()) error(path, "expected an integer");
  return j.get<int64_t>();
}

double Reader::number(const Json& j, const std::string& path) {
  if (j.is_number_float()) return j.get<double>();
  if (j.is_number()) return static_cast<double>(integer(j, path));
  if (j.is_object() && j.size() == 1 && j.contains("float") && j["float"].is_string()) {
    const std::string& s = j["float"].get_ref<const std::string&>();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  }
  error(path, "expected a number or {\"float\": \"inf\" | \"-inf\" | \"nan\"}");
}

Proxy Reader::proxy(const Json& j, const std::string& path) {
  check_keys(j, path,
             {"name", "device", "dtype", "shape", "dist", "future", "param", "requires_grad"});
  Proxy p;
  p.name = name(field(j, path, "name"), path + ".name");
  std::string dev = string(field(j, path, "device"), path + ".device");
  auto device = parse_device(dev);
  if (!device) error(path + ".device", "unknown device '", dev, "' (expected cpu or cuda:<n>)");
  p.type.device = *device;
  std::string dt = string(field(j, path, "dtype"), path + ".dtype");
  auto dtype = parse_dtype(dt);
  if (!dtype)
    error(path + ".dtype", "unknown dtype '", dt,
          "' (expected f32, f16, bf16, f64, i64, i32 or bool)");
  p.type.dtype = *dtype;
  const Json& shape = field(j, path, "shape");
  if (!shape.is_array()) error(path + ".shape", "expected an array of non-negative integers");
  for (const Json& d : shape) {
    if (!d.is_number_unsigned())  // the parser stores non-negative integers unsigned
      error(path + ".shape", "expected an array of non-negative integers");
    p.type.shape.push_back(integer(d, path + ".shape"));
  }
  if (j.contains("dist")) {
    std::string ds = string(j["dist"], path + ".dist");
    auto dist = parse_dist(ds);
    if (!dist)
      error(path + ".dist", "unknown distribution type '", ds,
            "' (expected none, replicated or fully_sharded)");
    p.type.dist = *dist;
  }
  if (j.contains("future")) {
    if (!j["future"].is_boolean()) error(path + ".future", "expected true or false");
    p.type.future = j["future"].get<bool>();
  }
  if (j.contains("param")) {
    p.param_path = string(j["param"], path + ".param");
    if (p.param_path.empty()) error(path + ".param", "expected a non-empty parameter path");
  }
  if (j.contains("requires_grad")) {
    if (!j["requires_grad"].is_boolean()) error(path + ".requires_grad", "expected true or false");
    p.requires_grad = j["requires_grad"].get<bool>();
  }
  return p;
}

Operand Reader::operand(const Json& j, const std::string& path) {
  if (j.is_string()) return Operand::of(name(j, path));
  if (!j.is_object() || !j.contains("scalar"))
    error(path, "expected a value name or {\"scalar\": <number>}");
  check_keys(j, path, {"scalar"});
  return Operand::lit(number(j["scalar"], path + ".scalar"));
}

IntList Reader::int_list(const Json& j, const std::string& path) {
  IntList out;
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_number_integer())
      error(path, "expected a list of integers or a list of integer lists");
    out.push_back(integer(j[i], path + "[" + std::to_string(i) + "]"));
  }
  return out;
}

AttrValue Reader::attr(const Json& j, const std::string& path) {
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_number_integer()) return integer(j, path);
  if (j.is_number_float()) return j.get<double>();
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.size() == 1 && j.contains("int_lists") && j["int_lists"].is_array() &&
      j["int_lists"].empty())
    return IntLists{};
  if (j.is_object()) return number(j, path);
  if (!j.is_array()) error(path, "expected an attribute value");
  if (j.empty() || !j[0].is_array()) return int_list(j, path);
  IntLists lists;
  for (size_t i = 0; i < j.size(); ++i) {
    std::string item_path = path + "[" + std::to_string(i) + "]";
    if (!j[i].is_array()) error(item_path, "expected an integer list, like the other items");
    lists.push_back(int_list(j[i], item_path));
  }
  return lists;
}

void Reader::check_arity(const BoundSymbol& b, const std::string& path) {
  const OpInfo& info = op_info(b.op);
  int n = static_cast<int>(b.inputs.size());
  if (n < info.min_inputs || (info.max_inputs >= 0 && n > info.max_inputs)) {
    std::string want = std::to_string(info.min_inputs);
    if (info.max_inputs < 0)
      want = "at least " + want;
    else if (info.max_inputs != info.min_inputs)
      want += " to " + std::to_string(info.max_inputs);
    error(path + ".inputs", "op '", info.name, "' takes ", want, " inputs, got ", n);
  }
  int outs = static_cast<int>(b.outputs.size());
  if (info.outputs >= 0 && outs != info.outputs)
    error(path + ".outputs", "op '", info.name, "' has ", info.outputs, " outputs, got ", outs);
}

BoundSymbol Reader::bsym(const Json& j, const std::string& path, int depth) {
  check_keys(j, path, {"op", "executor", "inputs", "attrs", "outputs", "subsymbols"});
  BoundSymbol b;
  std::string op = string(field(j, path, "op"), path + ".op");
  auto id = find_op(op);
  if (!id) error(path + ".op", "unknown op '", op, "'");
  b.op = *id;
  if (j.contains("executor")) {
    b.executor = string(j["executor"], path + ".executor");
    bool known = false;
    for (std::string_view e : executor_names()) known = known || e == b.executor;
    if (!known) error(path + ".executor", "unknown executor '", b.executor, "'");
  }
  const Json& inputs = field(j, path, "inputs");
  if (!inputs.is_array()) error(path + ".inputs", "expected an array");
  for (size_t i = 0; i < inputs.size(); ++i)
    b.inputs.push_back(operand(inputs[i], path + ".inputs[" + std::to_string(i) + "]"));
  if (j.contains("attrs")) {
    const Json& attrs = j["attrs"];
    if (!attrs.is_object()) error(path + ".attrs", "expected an object");
    for (const auto& item : attrs.items()) {
      if (!is_identifier(item.key()))
        error(path + ".attrs", "attribute name '", item.key(), "' is not an identifier");
      b.attrs.set(item.key(), attr(item.value(), path + ".attrs." + item.key()));
    }
  }
  const Json& outputs = field(j, path, "outputs");
  if (!outputs.is_array()) error(path + ".outputs", "expected an array");
  for (size_t i = 0; i < outputs.size(); ++i)
    b.outputs.push_back(proxy(outputs[i], path + ".outputs[" + std::to_string(i) + "]"));
  check_arity(b, path);
  if (j.contains("subsymbols")) {
    const Json& subs = j["subsymbols"];
    if (!subs.is_array()) error(path + ".subsymbols", "expected an array");
    if (!subs.empty() && depth >= kMaxSubsymbolDepth)
      error(path + ".subsymbols", "sub-symbols nest deeper than ", kMaxSubsymbolDepth, " levels");
    for (size_t i = 0; i < subs.size(); ++i)
      b.subsymbols.push_back(
          bsym(subs[i], path + ".subsymbols[" + std::to_string(i) + "]", depth + 1));
  }
  return b;
}

ReturnTree Reader::returns(const Json& j, const std::string& path, int depth) {
  if (j.is_string()) return ReturnTree::leaf(name(j, path));
  if (!j.is_array()) error(path, "expected a value name or an array of return values");
  if (depth >= kMaxReturnDepth)
    error(path, "return tuples nest deeper than ", kMaxReturnDepth, " levels");
  std::vector<ReturnTree> items;
  for (size_t i = 0; i < j.size(); ++i)
    items.push_back(returns(j[i], path + "[" + std::to_string(i) + "]", depth + 1));
  return ReturnTree::tuple(std::move(items));
}

Trace Reader::trace(const Json& j) {
  check_keys(j, "", {"version", "name", "provenance", "args", "bsyms", "returns"});
  if (j.contains("version") && (!j["version"].is_number_integer() || j["version"] != kVersion))
    error("version", "unsupported version (expected ", kVersion, ")");
  Trace t;
  t.name = name(field(j, "", "name"), "name");
  if (j.contains("provenance")) t.provenance = string(j["provenance"], "provenance");
  if (t.provenance.find('\n') != std::string::npos) error("provenance", "expected a single line");
  const Json& args = field(j, "", "args");
  if (!args.is_array()) error("args", "expected an array");
  for (size_t i = 0; i < args.size(); ++i)
    t.args.push_back(proxy(args[i], "args[" + std::to_string(i) + "]"));
  const Json& bsyms = field(j, "", "bsyms");
  if (!bsyms.is_array()) error("bsyms", "expected an array");
  for (size_t i = 0; i < bsyms.size(); ++i)
    t.bsyms.push_back(bsym(bsyms[i], "bsyms[" + std::to_string(i) + "]", 0));
  t.returns = returns(field(j, "", "returns"), "returns", 0);
  t.resync_counter();
  return t;
}

}  // namespace

std::string trace_to_json(const Trace& trace, int indent) {
  Json j;
  j["version"] = kVersion;
  j["name"] = trace.name;
  if (!trace.provenance.empty()) j["provenance"] = trace.provenance;
  Json args = Json::array();
  for (const Proxy& a : trace.args) args.push_back(proxy_to_json(a));
  j["args"] = std::move(args);
  Json bsyms = Json::array();
  for (const BoundSymbol& b : trace.bsyms) bsyms.push_back(bsym_to_json(b));
  j["bsyms"] = std::move(bsyms);
  j["returns"] = returns_to_json(trace.returns);
  try {
    return j.dump(indent) + "\n";
  } catch (const Json::type_error& e) {
    // Strings from a text file need not be UTF-8; JSON requires it.
    fail("cannot write trace ", trace.name, " as JSON: ", e.what());
  }
}

Trace trace_from_json(std::string_view text, std::string_view filename) {
  Json j;
  try {
    j = Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {  // parse_error, and out_of_range for a number past double's range
    fail(filename, ": malformed JSON: ", e.what());
  }
  return Reader(filename).trace(j);
}

}  // namespace fsdpc
