// Reads the canonical text form (ir/printer.cpp) back into a Trace. Purely
// syntactic plus op arity: types come from the comments and no meta function
// runs. Input is untrusted, so every malformed line is an fsdpc::Error.
#include "ir/parser.h"

#include <vector>

#include "ir/printer.h"
#include "ir/text_lexer.h"

namespace fsdpc {

namespace {

// Caps on nesting, so the trace's recursive algorithms (printing, equality,
// for_each_bsym) cannot overflow the stack on hostile input.
constexpr int kMaxSubsymbolDepth = 32;
constexpr int kMaxReturnDepth = 64;

void check_defined_name(TextCursor& cur, const std::string& name) {
  if (name == "inf" || name == "nan" || name == "return")
    cur.error("'", name, "' is reserved and cannot name a value");
}

[[noreturn]] void diagnose_type(TextCursor& cur, const std::string& text, const std::string& of) {
  // Name the part that is wrong: the usual mistakes are a misspelt device or dtype.
  std::string_view s = text;
  if (s.substr(0, 7) == "FUTURE ") s.remove_prefix(7);
  size_t sp = s.find(' ');
  size_t lb = s.find('[');
  if (sp != std::string_view::npos && !parse_device(s.substr(0, sp)))
    cur.error("unknown device '", s.substr(0, sp), "' in the type of ", of,
              " (expected cpu or cuda:<n>)");
  if (sp != std::string_view::npos && lb != std::string_view::npos && lb > sp &&
      !parse_dtype(s.substr(sp + 1, lb - sp - 1)))
    cur.error("unknown dtype '", s.substr(sp + 1, lb - sp - 1), "' in the type of ", of,
              " (expected f32, f16, bf16, f64, i64, i32 or bool)");
  cur.error("malformed type \"", text, "\" of ", of,
            ": expected \"[FUTURE ]<device> <dtype>[<dims>]\" such as \"cpu f32[2, 3]\"");
}

TensorType parse_type(TextCursor& cur, const std::string& of) {
  if (cur.peek() != '"')
    cur.error("expected '\"' to open the type of ", of, ", found ", cur.describe_next());
  std::string text = cur.quoted();
  auto t = parse_type_str(text);
  if (!t) diagnose_type(cur, text, of);
  return *t;
}

// `name: "<type>" [dist]`: one entry of a type comment.
Proxy parse_typed_name(TextCursor& cur, const std::string& expected) {
  Proxy p;
  p.name = cur.ident("'" + expected + ":' in the type comment");
  if (p.name != expected) cur.error("type comment names '", p.name, "', expected '", expected, "'");
  cur.expect(':', "after '" + p.name + "' in the type comment");
  p.type = parse_type(cur, p.name);
  std::string_view word = cur.peek_ident();
  if (word.empty() || word == "param" || word == "frozen") return p;
  std::string dist = cur.ident("a distribution type");
  auto d = parse_dist(dist);
  if (!d)
    cur.error("unknown distribution type '", dist, "' of ", p.name,
              " (expected replicated or fully_sharded)");
  p.type.dist = *d;
  return p;
}

// The integers of a list whose '[' was consumed, through its ']'.
IntList parse_int_items(TextCursor& cur, const std::string& key) {
  IntList out;
  while (!cur.accept(']')) {
    if (!out.empty()) cur.expect(',', "or ']' in the list " + key);
    if (!cur.next_is_number())
      cur.error("expected an integer in the list ", key, ", found ", cur.describe_next());
    NumberLiteral n = cur.number();
    if (!n.is_int)
      cur.error("expected an integer in the list ", key, ", found ", format_double(n.d));
    out.push_back(n.i);
  }
  return out;
}

// `[1, 2]`, `[[1], [2, 3]]` or `[]`: lists nest at most two deep.
AttrValue parse_list(TextCursor& cur, const std::string& key) {
  cur.expect('[', "to open a list in " + key);
  if (cur.peek() != '[') return parse_int_items(cur, key);
  IntLists lists;
  while (!cur.accept(']')) {
    if (!lists.empty()) cur.expect(',', "or ']' in the list " + key);
    if (cur.peek() != '[')
      cur.error("expected '[' in the list of lists ", key, ", found ", cur.describe_next());
    cur.expect('[', "in the list " + key);
    lists.push_back(parse_int_items(cur, key));
  }
  return lists;
}

AttrValue parse_attr_value(TextCursor& cur, const std::string& key) {
  char c = cur.peek();
  if (c == '[') return parse_list(cur, key);
  if (c == '"') return cur.quoted();
  if (cur.next_is_number()) {
    NumberLiteral n = cur.number();
    if (n.is_int) return n.i;
    return n.d;
  }
  if (!cur.next_is_ident())
    cur.error("expected a value for ", key,
              " (number, True/False, name, \"string\" or list), found ", cur.describe_next());
  std::string word = cur.ident("a value");
  if (word == "True") return true;
  if (word == "False") return false;
  return word;
}

// `(inputs..., key=value...)`; the '(' was consumed.
void parse_call_args(TextCursor& cur, BoundSymbol& b) {
  bool keyword_seen = false;
  while (!cur.accept(')')) {
    if (!b.inputs.empty() || !b.attrs.empty()) cur.expect(',', "or ')' in the argument list");
    std::string_view word = cur.peek_ident();
    if (!word.empty()) {
      // `key=` makes an attribute; a bare word is an input name.
      TextCursor probe = cur;
      probe.ident("a name");
      if (probe.accept('=')) {
        std::string key = cur.ident("an attribute name");
        cur.expect('=', "after " + key);
        if (b.attrs.has(key)) cur.error("duplicate attribute '", key, "'");
        b.attrs.set(key, parse_attr_value(cur, key));
        keyword_seen = true;
        continue;
      }
    }
    if (keyword_seen)
      cur.error("positional input ", cur.describe_next(), " after a keyword attribute");
    if (cur.next_is_number()) {
      b.inputs.push_back(Operand::lit(cur.number().as_double()));
    } else {
      b.inputs.push_back(Operand::of(cur.ident("an input name, a number or ')'")));
    }
  }
}

void check_arity(TextCursor& cur, const BoundSymbol& b) {
  const OpInfo& info = op_info(b.op);
  int n = static_cast<int>(b.inputs.size());
  if (n < info.min_inputs || (info.max_inputs >= 0 && n > info.max_inputs)) {
    if (info.max_inputs < 0)
      cur.error("op '", info.name, "' takes at least ", info.min_inputs, " inputs, got ", n);
    if (info.min_inputs == info.max_inputs)
      cur.error("op '", info.name, "' takes ", info.min_inputs, " input",
                info.min_inputs == 1 ? "" : "s", ", got ", n);
    cur.error("op '", info.name, "' takes ", info.min_inputs, " to ", info.max_inputs,
              " inputs, got ", n);
  }
  int outs = static_cast<int>(b.outputs.size());
  if (info.outputs >= 0 && outs != info.outputs)
    cur.error("op '", info.name, "' has ", info.outputs, " output", info.outputs == 1 ? "" : "s",
              ", got ", outs);
}

// The names of `del t5, t7` after the word `del`; no type comment follows.
BoundSymbol parse_del_names(TextCursor& cur) {
  BoundSymbol b;
  b.op = OpId::Del;
  do {
    b.inputs.push_back(Operand::of(cur.ident("a name to delete")));
  } while (cur.accept(','));
  if (!cur.at_end())
    cur.error("unexpected ", cur.describe_next(),
              " in the del statement (expected ',' or the end of the line)");
  return b;
}

// `[outs =] op(args)  [# types]` or `del a, b`, the text of a statement or
// sub-symbol.
BoundSymbol parse_statement(TextCursor& cur) {
  std::vector<std::string> outs;
  std::string word = cur.ident("a statement");
  if (word == "del" && cur.next_is_ident()) return parse_del_names(cur);
  if (word == "del" && cur.at_end()) cur.error("del names no value (expected 'del <name>, ...')");
  if (cur.peek() == ',' || cur.peek() == '=') {
    outs.push_back(word);
    while (cur.accept(',')) outs.push_back(cur.ident("an output name"));
    cur.expect('=', "after the output names");
    word = cur.ident("an op name");
  }
  BoundSymbol b;
  auto sym = resolve_symbol_name(word);
  if (!sym) cur.error("unknown op '", word, "'");
  b.op = sym->op;
  b.executor = sym->executor;
  cur.expect('(', "after op '" + word + "'");
  parse_call_args(cur, b);
  if (!outs.empty()) {
    if (cur.at_end()) cur.error("output ", outs[0], " has no type comment");
    cur.expect('#', "to start the type comment");
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    check_defined_name(cur, outs[i]);
    if (i > 0 && !cur.accept(',')) cur.error("output ", outs[i], " has no type comment");
    b.outputs.push_back(parse_typed_name(cur, outs[i]));
  }
  if (!cur.at_end()) cur.error("unexpected ", cur.describe_next(), " at the end of the statement");
  check_arity(cur, b);
  return b;
}

// A return value: a name or a (possibly nested) tuple. As in Python, `(a)`
// is just `a`; `(a,)` is a 1-tuple.
ReturnTree parse_return_item(TextCursor& cur, int depth) {
  if (!cur.accept('(')) return ReturnTree::leaf(cur.ident("a return value"));
  if (depth >= kMaxReturnDepth)
    cur.error("return tuples nest deeper than ", kMaxReturnDepth, " levels");
  std::vector<ReturnTree> items;
  bool trailing_comma = false;
  while (!cur.accept(')')) {
    items.push_back(parse_return_item(cur, depth + 1));
    trailing_comma = false;
    if (cur.accept(')')) break;
    cur.expect(',', "or ')' in the return tuple");
    trailing_comma = true;
  }
  if (items.size() == 1 && !trailing_comma) return std::move(items[0]);
  return ReturnTree::tuple(std::move(items));
}

// `return a`, `return (a,)`, `return ()` or `return a, (b, c)`.
ReturnTree parse_returns(TextCursor& cur) {
  cur.ident("'return'");
  ReturnTree first = parse_return_item(cur, 0);
  if (cur.peek() == ',') {
    std::vector<ReturnTree> items{std::move(first)};
    while (cur.accept(',')) items.push_back(parse_return_item(cur, 0));
    first = ReturnTree::tuple(std::move(items));
  }
  if (!cur.at_end()) cur.error("unexpected ", cur.describe_next(), " after the return value");
  return first;
}

struct Line {
  std::string_view text;
  int number;
};

// Reads the lines in order; owns the sub-symbol nesting state.
class Parser {
 public:
  Parser(std::string_view text, std::string_view file);
  Trace parse();

 private:
  const Line* next_line();  // skips blank lines; nullptr at the end
  TextCursor cursor(const Line& l) const { return TextCursor(l.text, file_, l.number); }
  [[noreturn]] void fail_eof(std::string_view what) const {
    fail(file_, ":", lines_.empty() ? 1 : lines_.back().number, ": unexpected end of file: ", what);
  }
  void parse_header();
  void parse_arg_comment(Proxy& arg, int def_line);
  bool parse_body_line(const Line& l);  // true at `return`
  void add_subsymbol(TextCursor& cur, size_t depth, BoundSymbol b);

  std::vector<Line> lines_;
  size_t next_ = 0;
  std::string_view file_;
  Trace trace_;
  std::vector<size_t> open_;  // index of the last symbol at each depth
};

Parser::Parser(std::string_view text, std::string_view file) : file_(file) {
  int number = 0;
  while (!text.empty() || number == 0) {
    size_t nl = text.find('\n');
    std::string_view l = text.substr(0, nl);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    lines_.push_back({l, ++number});
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

const Line* Parser::next_line() {
  while (next_ < lines_.size()) {
    const Line& l = lines_[next_++];
    if (l.text.find_first_not_of(" \t") != std::string_view::npos) return &l;
  }
  return nullptr;
}

void Parser::parse_header() {
  const Line* l = next_line();
  if (!l) fail_eof("missing 'def <name>(<args>):'");
  constexpr std::string_view kProvenance = "# Constructed by ";
  if (l->text.substr(0, kProvenance.size()) == kProvenance) {
    trace_.provenance = std::string(l->text.substr(kProvenance.size()));
    l = next_line();
    if (!l) fail_eof("missing 'def <name>(<args>):'");
  }
  TextCursor cur = cursor(*l);
  if (cur.peek_ident() != "def" || l->text[0] == ' ')
    cur.error(
        "expected '# Constructed by <pass>' or 'def <name>(<args>):' at the start of "
        "the trace, found ",
        cur.describe_next());
  cur.ident("'def'");
  trace_.name = cur.ident("the trace name after 'def'");
  cur.expect('(', "after the trace name");
  while (!cur.accept(')')) {
    if (!trace_.args.empty()) cur.expect(',', "or ')' in the argument list");
    Proxy arg;
    arg.name = cur.ident("an argument name");
    check_defined_name(cur, arg.name);
    trace_.args.push_back(std::move(arg));
  }
  cur.expect(':', "after the argument list");
  if (!cur.at_end()) cur.error("unexpected ", cur.describe_next(), " after 'def ...:'");
  for (Proxy& arg : trace_.args) parse_arg_comment(arg, l->number);
}

// `  # x: "<type>" [dist] [param=<path> [frozen]]`
void Parser::parse_arg_comment(Proxy& arg, int def_line) {
  const std::string name = arg.name;
  const Line* l = next_line();
  if (!l) fail(file_, ":", def_line, ": argument ", name, " has no type comment");
  TextCursor cur = cursor(*l);
  if (l->text.substr(0, 4) != "  # ")
    cur.error("argument ", name, " has no type comment (expected '  # ", name, ": \"<type>\"')");
  cur.expect('#', "");
  Proxy p = parse_typed_name(cur, name);
  if (cur.peek_ident() == "param") {
    cur.ident("'param'");
    cur.expect('=', "after 'param'");
    p.param_path = cur.peek() == '"' ? cur.quoted() : cur.path();
    if (p.param_path.empty()) cur.error("empty parameter path of ", name);
  }
  if (cur.peek_ident() == "frozen") {
    if (!p.is_param()) cur.error("'frozen' applies only to parameters (param=<path>)");
    cur.ident("'frozen'");
    p.requires_grad = false;
  }
  if (!cur.at_end())
    cur.error("unexpected ", cur.describe_next(), " in the comment of argument ", name,
              " (expected a distribution type, param=<path> or frozen)");
  arg = std::move(p);
}

void Parser::add_subsymbol(TextCursor& cur, size_t depth, BoundSymbol b) {
  if (open_.empty()) cur.error("sub-symbol line before any statement");
  if (depth > kMaxSubsymbolDepth)
    cur.error("sub-symbols nest deeper than ", kMaxSubsymbolDepth, " levels");
  if (depth > open_.size())
    cur.error("sub-symbol at depth ", depth, " skips a level: the line before is at depth ",
              open_.size() - 1, " (indent each level by 2 more spaces)");
  BoundSymbol* parent = &trace_.bsyms[open_[0]];
  for (size_t k = 1; k < depth; ++k) parent = &parent->subsymbols[open_[k]];
  parent->subsymbols.push_back(std::move(b));
  open_.resize(depth);
  open_.push_back(parent->subsymbols.size() - 1);
}

bool Parser::parse_body_line(const Line& l) {
  TextCursor cur = cursor(l);
  size_t indent = l.text.find_first_not_of(' ');
  if (l.text[indent] == '\t') cur.error("tab in the indentation; indent with spaces");
  if (l.text[indent] == '#') {
    if (indent < 4 || indent % 2 != 0)
      cur.error("a sub-symbol line must be indented 2 spaces more than its parent (found ", indent,
                " spaces)");
    cur.expect('#', "");
    add_subsymbol(cur, indent / 2 - 1, parse_statement(cur));
    return false;
  }
  if (indent != 2) cur.error("expected a statement indented by 2 spaces (found ", indent, ")");
  if (cur.peek_ident() == "return") {
    trace_.returns = parse_returns(cur);
    return true;
  }
  trace_.bsyms.push_back(parse_statement(cur));
  open_.assign(1, trace_.bsyms.size() - 1);
  return false;
}

Trace Parser::parse() {
  parse_header();
  while (true) {
    const Line* l = next_line();
    if (!l) fail_eof("missing 'return'");
    if (parse_body_line(*l)) break;
  }
  if (const Line* l = next_line()) {
    TextCursor cur = cursor(*l);
    cur.error("unexpected text after 'return': ", cur.describe_next());
  }
  trace_.resync_counter();
  return std::move(trace_);
}

}  // namespace

Trace parse_trace(std::string_view text, std::string_view filename) {
  return Parser(text, filename).parse();
}

}  // namespace fsdpc
