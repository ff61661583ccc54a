// The canonical text form: exact printed text, round trips both ways, every
// parser error with its line, and a mutation fuzz that parsing never crashes.
#include <catch2/catch.hpp>
#include <random>

#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "trace_samples.h"

using namespace fsdpc;
using namespace fsdpc::samples;

namespace {

const char* const kSmallText =
    "# Constructed by trace\n"
    "def computation(x, t_0_weight, t_2_weight):\n"
    "  # x: \"cpu f32[64, 64]\"\n"
    "  # t_0_weight: \"cpu f32[64, 64]\" param=0.weight\n"
    "  # t_2_weight: \"cpu f32[32, 64]\" fully_sharded param=2.weight frozen\n"
    "  t0 = linear(x, t_0_weight)  # t0: \"cpu f32[64, 64]\"\n"
    "    # t1 = permute(t_0_weight, dims=[1, 0])  # t1: \"cpu f32[64, 64]\"\n"
    "    # t0 = matmul(x, t1)  # t0: \"cpu f32[64, 64]\"\n"
    "  t2 = mul(t0, 0.5)  # t2: \"cpu f32[64, 64]\"\n"
    "  ft3 = all_gather(t_2_weight, group=dp, size=2, dim=0)  # ft3: \"FUTURE cpu f32[64, 64]\" "
    "replicated\n"
    "  t4, t5 = unpack(t9, shapes=[[2, 3], [4]])  # t4: \"cpu f32[2, 3]\", t5: \"cpu f32[4]\"\n"
    "  return t2\n";

// Replaces line `line` (1-based) of `text` with `replacement` (which may hold
// several lines, or none).
std::string with_line(std::string text, int line, const std::string& replacement) {
  size_t begin = 0;
  for (int i = 1; i < line; ++i) begin = text.find('\n', begin) + 1;
  size_t end = text.find('\n', begin);
  return text.replace(begin, end + 1 - begin, replacement.empty() ? "" : replacement + "\n");
}

// Parsing must throw an fsdpc::Error naming file, line and the given words.
void expect_error(const std::string& text, int line, std::vector<std::string> words) {
  INFO(text);
  try {
    parse_trace(text, "model.trace");
    FAIL("parsed without error");
  } catch (const Error& e) {
    std::string msg = e.what();
    INFO(msg);
    CHECK(msg.rfind("model.trace:" + std::to_string(line) + ": ", 0) == 0);
    for (const std::string& w : words) CHECK(msg.find(w) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("format_double is shortest and always reads as a float") {
  CHECK(format_double(0.5) == "0.5");
  CHECK(format_double(2.0) == "2.0");
  CHECK(format_double(-3.0) == "-3.0");
  CHECK(format_double(1e-05) == "1e-05");
  CHECK(format_double(1e20) == "1e+20");
  CHECK(format_double(0.1) == "0.1");
  CHECK(format_double(1.0 / 3.0) == "0.3333333333333333");
  CHECK(format_double(std::numeric_limits<double>::infinity()) == "inf");
  CHECK(format_double(-std::numeric_limits<double>::infinity()) == "-inf");
  CHECK(format_double(std::nan("")) == "nan");
  CHECK(format_double(-0.0) == "-0.0");
}

TEST_CASE("the small trace prints exactly") { CHECK(print_trace(small_trace()) == kSmallText); }

TEST_CASE("the rich trace prints every attribute kind, quoting where needed") {
  std::string text = print_trace(rich_trace());
  CHECK(text.rfind("# Constructed by fsdp (zero3)\ndef forward(x, y, idx, t_h_0_w, t_b):\n", 0) ==
        0);
  CHECK(text.find("  # y: \"cuda:1 bf16[8]\"\n") != std::string::npos);
  CHECK(text.find("  # idx: \"cpu i64[]\" replicated\n") != std::string::npos);
  CHECK(text.find("  # t_h_0_w: \"cpu f32[4, 8]\" fully_sharded "
                  "param=\"h.0 \\\"odd\\\"\\\\path\\n\" frozen\n") != std::string::npos);
  CHECK(text.find("  # t_b: \"cpu f32[8]\" replicated param=b\n") != std::string::npos);
  CHECK(text.find("  t0 = pad(x, i=-7, d=2.0, tiny=1e-05, big=1e+20, ninf=-inf, nan=nan, "
                  "yes=True, no=False, s=dp, q=\"a b, \\\"c\\\" # d\\\\e\\tf\\ng\", "
                  "kw=\"True\", kinf=\"inf\", empty=\"\", ints=[1, -2, 3], none=[], "
                  "lists=[[], [1], [2, 3]])  # t0: \"cpu f32[2, 8]\"\n") != std::string::npos);
  CHECK(text.find("  t1 = add(t0, -inf)  #") != std::string::npos);
  CHECK(text.find("  t2 = mul(nan, t1)  #") != std::string::npos);
  CHECK(text.find("  t3 = sub(t2, 1e-05)  #") != std::string::npos);
  CHECK(text.find("  t4 = div(t3, 2.0)  #") != std::string::npos);
  CHECK(text.find("\n  unpack(t4, shapes=[])\n") != std::string::npos);
  CHECK(text.find("  t5 = softmax(t4, dim=1)  # t5: \"cpu f32[2, 8]\"\n"
                  "    # t6 = amax(t4, dims=[1])  # t6: \"cpu f32[2, 8]\"\n"
                  "    # t7 = sub(t4, t6)  # t7: \"cpu f32[2, 8]\"\n"
                  "      # t8 = neg(t6)  # t8: \"cpu f32[2, 8]\"\n"
                  "      # t7 = add(t4, t8)  # t7: \"cpu f32[2, 8]\"\n"
                  "    # t5 = exp(t7)  # t5: \"cpu f32[2, 8]\"\n") != std::string::npos);
  CHECK(text.find("  ft9 = reduce_scatter(t5, group=shard, size=2, dim=0, op=sum)  "
                  "# ft9: \"FUTURE cpu f32[1, 8]\" fully_sharded\n") != std::string::npos);
  CHECK(text.find("  t11, t12 = unpack(t_b, shapes=[[2, 2], [4]])  "
                  "# t11: \"cpu f32[2, 2]\" replicated, t12: \"cpu f32[4]\" replicated\n") !=
        std::string::npos);
  CHECK(text.find("  t13 = cat(t11, t11, t11, dim=0)  #") != std::string::npos);
  const std::string last = "\n  return x, (t10,), (), ((t12, t13), t5)\n";
  REQUIRE(text.size() > last.size());
  CHECK(text.substr(text.size() - last.size()) == last);
  CHECK(text.find(" \n") == std::string::npos);  // no trailing spaces
}

TEST_CASE("return trees print like Python") {
  auto ret_line = [](ReturnTree r) {
    Trace t;
    t.args = {value("a", {1}), value("b", {1})};
    t.returns = std::move(r);
    std::string text = print_trace(t);
    CHECK(parse_trace(text) == t);
    size_t at = text.find("  return ");
    return text.substr(at + 9, text.size() - at - 10);
  };
  CHECK(ret_line(leaf("a")) == "a");
  CHECK(ret_line(tuple({})) == "()");
  CHECK(ret_line(tuple({leaf("a")})) == "(a,)");
  CHECK(ret_line(tuple({leaf("a"), leaf("b")})) == "a, b");
  CHECK(ret_line(tuple({tuple({leaf("a")}), tuple({leaf("a"), leaf("b")})})) == "(a,), (a, b)");
  CHECK(ret_line(tuple({tuple({})})) == "((),)");
  CHECK(ret_line(tuple({tuple({tuple({})})})) == "(((),),)");
  CHECK(ret_line(tuple({tuple({leaf("a"), leaf("b")})})) == "((a, b),)");
  // As in Python, parentheses alone do not make a tuple.
  Trace p = parse_trace("def f(a):\n  # a: \"cpu f32[]\"\n  return ((a))\n");
  CHECK(p.returns == leaf("a"));
  CHECK(parse_trace("def f(a):\n  # a: \"cpu f32[]\"\n  return (a, a,)\n").returns ==
        tuple({leaf("a"), leaf("a")}));
}

TEST_CASE("parse(print(t)) == t") {
  Trace small = small_trace();
  Trace parsed = parse_trace(print_trace(small));
  CHECK(parsed == small);
  CHECK(parsed.next_id == 6);  // past t5; t9 is read but never defined, so not counted
  Trace rich = rich_trace(false);
  CHECK(parse_trace(print_trace(rich)) == rich);
  CHECK(parse_trace(print_trace(rich)).next_id == 14);
  // NaN attributes never compare equal, so that trace is checked through its text.
  Trace with_nan = parse_trace(print_trace(rich_trace()));
  CHECK(std::isnan(with_nan.bsyms[0].attrs.get_double("nan")));
  CHECK(std::isnan(*with_nan.bsyms[2].inputs[0].scalar));
  CHECK(print_trace(with_nan) == print_trace(rich_trace()));
}

TEST_CASE("parsed values keep their kinds") {
  Trace t = parse_trace(print_trace(rich_trace()));
  const Attrs& a = t.bsyms[0].attrs;
  CHECK(std::get<int64_t>(*a.find("i")) == -7);
  CHECK(std::get<double>(*a.find("d")) == 2.0);
  CHECK(std::get<double>(*a.find("ninf")) == -std::numeric_limits<double>::infinity());
  CHECK(std::get<bool>(*a.find("yes")));
  CHECK(std::get<std::string>(*a.find("kw")) == "True");
  CHECK(std::get<std::string>(*a.find("empty")).empty());
  CHECK(std::get<IntList>(*a.find("none")).empty());
  CHECK(std::get<IntLists>(*a.find("lists")) == IntLists{{}, {1}, {2, 3}});
  CHECK(t.args[3].param_path == "h.0 \"odd\"\\path\n");
  CHECK_FALSE(t.args[3].requires_grad);
  CHECK(t.args[4].requires_grad);
  CHECK(t.args[1].type.device == Device{DeviceKind::cuda, 1});
  CHECK(t.bsyms[5].outputs.empty());
  // An integer-looking operand is a double; it prints back as one.
  Trace two = parse_trace(
      "def f(a):\n  # a: \"cpu f32[2]\"\n"
      "  t0 = mul(a, 2)  # t0: \"cpu f32[2]\"\n  return t0\n");
  CHECK(two.bsyms[0].inputs[1] == Operand::lit(2.0));
  CHECK(print_trace(two).find("mul(a, 2.0)") != std::string::npos);
}

TEST_CASE("print(parse(s)) == s, with blank lines and CRLF accepted") {
  std::string rich = print_trace(rich_trace());
  CHECK(print_trace(parse_trace(rich)) == rich);
  CHECK(print_trace(parse_trace(kSmallText)) == kSmallText);
  std::string loose =
      with_line(kSmallText, 6, "\n  t0 = linear(x, t_0_weight)  # t0: \"cpu f32[64, 64]\"\r\n  ");
  CHECK(print_trace(parse_trace(loose)) == kSmallText);
  Trace bare = parse_trace("def f():\n  return ()\n");
  CHECK(bare.provenance.empty());
  CHECK(print_trace(bare) == "def f():\n  return ()\n");
}

TEST_CASE("parser errors name the line and what was expected") {
  const std::string s = kSmallText;
  const std::string ty = "  # t0: \"cpu f32[64, 64]\"";
  expect_error(with_line(s, 6, "  t0 = lnear(x, t_0_weight)" + ty), 6, {"unknown op 'lnear'"});
  expect_error(with_line(s, 6, "  t0 = linear(x, t_0_weight)  # t0: cpu f32[64, 64]"), 6,
               {"expected '\"' to open the type of t0", "found 'cpu'"});
  expect_error(
      with_line(s, 11, "  t4, t5 = unpack(t9, shapes=[[2, 3], [4]])  # t4: \"cpu f32[2, 3]\""), 11,
      {"output t5 has no type comment"});
  expect_error(with_line(s, 9, "  t2 = mul(t0, 0.5)"), 9, {"output t2 has no type comment"});
  expect_error(with_line(s, 12, ""), 11, {"unexpected end of file: missing 'return'"});
  expect_error("", 1, {"unexpected end of file", "def"});
  // arity, against the op table
  expect_error(with_line(s, 9, "  t2 = mul(t0)  # t2: \"cpu f32[64, 64]\""), 9,
               {"op 'mul' takes 2 inputs, got 1"});
  expect_error(with_line(s, 6, "  t0 = linear(x)" + ty), 6,
               {"op 'linear' takes 2 to 3 inputs, got 1"});
  expect_error(with_line(s, 9, "  t2, t3 = mul(t0, 0.5)  # t2: \"cpu f32[1]\", t3: \"cpu f32[1]\""),
               9, {"op 'mul' has 1 output, got 2"});
  expect_error(with_line(s, 9, "  t2 = cat()  # t2: \"cpu f32[1]\""), 9,
               {"op 'cat' takes at least 1 inputs, got 0"});
  // types
  expect_error(with_line(s, 3, "  # x: \"cpu f31[64, 64]\""), 3,
               {"unknown dtype 'f31'", "type of x"});
  expect_error(with_line(s, 3, "  # x: \"xpu f32[64, 64]\""), 3, {"unknown device 'xpu'"});
  expect_error(with_line(s, 3, "  # x: \"cpu f32[64, -1]\""), 3,
               {"malformed type \"cpu f32[64, -1]\" of x"});
  expect_error(with_line(s, 3, "  # x: \"cpu f32[64, 64\""), 3, {"malformed type"});
  expect_error(with_line(s, 3, "  # x: \"cpu f32[64, 64]\" replicatd"), 3,
               {"unknown distribution type 'replicatd'"});
  expect_error(with_line(s, 3, "  # x: \"cpu f32[64, 64]\" frozen"), 3,
               {"'frozen' applies only to parameters"});
  expect_error(with_line(s, 3, "  # y: \"cpu f32[64, 64]\""), 3, {"names 'y', expected 'x'"});
  expect_error(with_line(s, 3, ""), 3, {"names 't_0_weight', expected 'x'"});
  expect_error(with_line(s, 3, "  t0 = neg(x)  # t0: \"cpu f32[1]\""), 3,
               {"argument x has no type comment"});
  expect_error(with_line(s, 4, "  # t_0_weight: \"cpu f32[64, 64]\" param=\"0.weight"), 4,
               {"unterminated string"});
  // attributes and inputs
  expect_error(
      with_line(s, 7,
                "    # t1 = permute(t_0_weight, dims=[1, 0], dims=[0, 1])  # t1: \"cpu f32[1]\""),
      7, {"duplicate attribute 'dims'"});
  expect_error(with_line(s, 10, "  ft3 = all_gather(group=dp, t_2_weight)  # ft3: \"cpu f32[1]\""),
               10, {"positional input 't_2_weight' after a keyword attribute"});
  expect_error(with_line(s, 7, "    # t1 = permute(t_0_weight, dims=[1, 0)  # t1: \"cpu f32[1]\""),
               7, {"expected ',' or ']'", "found ')'"});
  expect_error(
      with_line(s, 11, "  t4, t5 = unpack(t9, shapes=[[2, 3], [4])  # t4: \"cpu f32[2, 3]\""), 11,
      {"expected ',' or ']'"});
  expect_error(with_line(s, 9, "  t2 = mul(t0, 0.5  # t2: \"cpu f32[64, 64]\""), 9,
               {"expected ',' or ')' in the argument list, found '#'"});
  expect_error(
      with_line(s, 7, "    # t1 = permute(t_0_weight, dims=[[[1]]])  # t1: \"cpu f32[1]\""), 7,
      {"expected an integer in the list dims"});
  expect_error(with_line(s, 7, "    # t1 = permute(t_0_weight, dims=[1.5])  # t1: \"cpu f32[1]\""),
               7, {"expected an integer", "1.5"});
  expect_error(
      with_line(s, 10,
                "  ft3 = all_gather(t_2_weight, size=99999999999999999999)  # ft3: \"cpu f32[1]\""),
      10, {"integer '99999999999999999999' is out of range"});
  expect_error(
      with_line(s, 10, "  ft3 = all_gather(t_2_weight, size=1e999)  # ft3: \"cpu f32[1]\""), 10,
      {"out of range"});
  expect_error(
      with_line(s, 10, "  ft3 = all_gather(t_2_weight, group=\"a\\qb\")  # ft3: \"cpu f32[1]\""),
      10, {"unknown escape '\\q'"});
  expect_error(with_line(s, 9, "  inf = neg(t0)  # inf: \"cpu f32[1]\""), 9, {"'inf' is reserved"});
  expect_error(
      with_line(s, 9, "  t2 = mul(t0, 0.5)  # t2: \"cpu f32[64, 64]\", t3: \"cpu f32[1]\""), 9,
      {"unexpected ','"});
  expect_error(with_line(s, 9, "  t2 = mul(t0, 0x5)  # t2: \"cpu f32[64, 64]\""), 9,
               {"expected a number"});
  // structure
  expect_error(with_line(s, 12, "  return t2\n  t9 = neg(t2)  # t9: \"cpu f32[1]\""), 13,
               {"unexpected text after 'return'", "'t9'"});
  expect_error(with_line(s, 12, "  return t2 t3"), 12, {"unexpected 't3' after the return value"});
  expect_error(with_line(s, 12, "  return t2,"), 12, {"expected a return value"});
  expect_error(with_line(s, 12, "  return (t2"), 12, {"expected ',' or ')' in the return tuple"});
  expect_error(with_line(s, 12, "  return " + std::string(100, '(') + "t2" + std::string(100, ')')),
               12, {"nest deeper than 64"});
  expect_error(
      with_line(s, 7, "      # t1 = permute(t_0_weight, dims=[1, 0])  # t1: \"cpu f32[1]\""), 7,
      {"skips a level"});
  expect_error(
      with_line(s, 7, "     # t1 = permute(t_0_weight, dims=[1, 0])  # t1: \"cpu f32[1]\""), 7,
      {"indented 2 spaces more than its parent"});
  expect_error(with_line(s, 6, "    # t1 = neg(x)  # t1: \"cpu f32[1]\""), 6,
               {"sub-symbol line before any statement"});
  expect_error(with_line(s, 9, "   t2 = mul(t0, 0.5)  # t2: \"cpu f32[64, 64]\""), 9,
               {"indented by 2 spaces"});
  expect_error(with_line(s, 9, "  # a comment"), 9, {"indented 2 spaces more"});
  expect_error("  t0 = neg(x)  # t0: \"cpu f32[1]\"\n" + s, 1,
               {"expected", "'def <name>(<args>):'", "'t0'"});
  expect_error(with_line(s, 2, "def computation(x, t_0_weight, t_2_weight)"), 2,
               {"expected ':' after the argument list"});
  expect_error(with_line(s, 2, "def computation(x t_0_weight)"), 2,
               {"expected ',' or ')'", "'t_0_weight'"});
  expect_error(with_line(s, 9, "  t2 = mul(t0, \x01)  # t2: \"cpu f32[64, 64]\""), 9, {"'\\x01'"});
}

TEST_CASE("sub-symbols nest deeply only up to a cap") {
  std::string text = "def f(a):\n  # a: \"cpu f32[]\"\n  t0 = neg(a)  # t0: \"cpu f32[]\"\n";
  for (int d = 1; d <= 40; ++d)
    text += std::string(2 + 2 * d, ' ') + "# t0 = neg(a)  # t0: \"cpu f32[]\"\n";
  text += "  return t0\n";
  expect_error(text, 36, {"sub-symbols nest deeper than 32 levels"});
}

// Random deletions, insertions and replacements of the printed text of the
// rich trace: every result must parse or throw fsdpc::Error, and whatever
// parses must print to a fixed point.
TEST_CASE("mutated text never crashes the parser") {
  const std::string base = print_trace(rich_trace());
  const std::string alphabet = "()[],=#:\"\\ \n\t.-+e0123456789tfxinaTF_";
  std::mt19937 rng(20240611);
  int parsed = 0, rejected = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::string text = iter % 2 ? base : print_trace(small_trace());
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      size_t pos = rng() % text.size();
      char c = rng() % 3 ? alphabet[rng() % alphabet.size()] : static_cast<char>(rng() % 256);
      switch (rng() % 4) {
        case 0:
          text.erase(pos, 1 + rng() % 3);
          break;
        case 1:
          text.insert(pos, 1, c);
          break;
        case 2:
          text[pos] = c;
          break;
        default:
          text.insert(pos, text.substr(rng() % text.size(), rng() % 40));
          break;
      }
    }
    try {
      Trace t = parse_trace(text, "fuzz");
      std::string printed = print_trace(t);
      INFO(text);
      REQUIRE(print_trace(parse_trace(printed)) == printed);
      ++parsed;
    } catch (const Error& e) {
      REQUIRE(std::string(e.what()).rfind("fuzz:", 0) == 0);
      ++rejected;
    }
  }
  CHECK(parsed > 50);  // the mutations must not all be fatal, or the fuzz tests little
  CHECK(rejected > 1000);
}

TEST_CASE("del prints as a Python del statement and parses back") {
  Trace t = small_trace();
  t.bsyms.push_back(bsym(OpId::Del, {in("t0"), in("x")}, {}, {}));
  t.bsyms.push_back(bsym(OpId::Del, {in("t4")}, {}, {}));
  const std::string text = print_trace(t);
  CHECK(text.find("\n  del t0, x\n  del t4\n  return t2\n") != std::string::npos);
  CHECK(parse_trace(text) == t);
  CHECK(print_trace(parse_trace(text)) == text);
  // The call form reads too, and prints back in the short form.
  Trace call = parse_trace(with_line(kSmallText, 12, "  del(t0, x)\n  return t2"));
  REQUIRE(call.bsyms.back().op == OpId::Del);
  CHECK(call.bsyms.back().inputs == std::vector<Operand>{in("t0"), in("x")});
  CHECK(print_trace(call).find("\n  del t0, x\n") != std::string::npos);
  // A name may be `del` itself; only `del <name>` starts a del statement.
  Trace named = parse_trace(
      "def f(a):\n  # a: \"cpu f32[2]\"\n  del = neg(a)  # del: \"cpu f32[2]\"\n"
      "  del del\n  return a\n");
  CHECK(named.bsyms[0].outputs[0].name == "del");
  CHECK(named.bsyms[1].inputs == std::vector<Operand>{in("del")});
}

TEST_CASE("a del the short form cannot carry prints in the call form") {
  Trace t = small_trace();
  t.bsyms.push_back(bsym(OpId::Del, {in("t0")}, {{"why", std::string("odd")}}, {}));
  const std::string text = print_trace(t);
  CHECK(text.find("\n  del(t0, why=odd)\n") != std::string::npos);
  CHECK(parse_trace(text) == t);
}

TEST_CASE("malformed del statements name the line") {
  const std::string s = kSmallText;
  expect_error(with_line(s, 12, "  del\n  return t2"), 12, {"del names no value"});
  expect_error(with_line(s, 12, "  del t0,\n  return t2"), 12, {"expected a name to delete"});
  expect_error(with_line(s, 12, "  del t0 t2\n  return t2"), 12,
               {"unexpected 't2' in the del statement"});
  expect_error(with_line(s, 12, "  del t0  # t0: \"cpu f32[64, 64]\"\n  return t2"), 12,
               {"unexpected '#' in the del statement"});
  expect_error(with_line(s, 12, "  t7 = del(t0)  # t7: \"cpu f32[1]\"\n  return t2"), 12,
               {"op 'del' has 0 outputs, got 1"});
  expect_error(with_line(s, 12, "  del()\n  return t2"), 12,
               {"op 'del' takes at least 1 inputs, got 0"});
}
