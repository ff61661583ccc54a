// Lexing one line of the trace text form. Kept apart from the grammar in
// ir/parser.cpp; bounds are checked on every read because input is untrusted.
#include "ir/text_lexer.h"

#include <charconv>
#include <cmath>

namespace fsdpc {

bool is_ident_start_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

bool is_ident_char(char c) { return is_ident_start_char(c) || (c >= '0' && c <= '9'); }

namespace {
bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool is_number_char(char c, char prev) {
  if (is_ident_char(c) || c == '.') return true;
  return (c == '+' || c == '-') && (prev == 'e' || prev == 'E');
}

std::string printable(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    } else {
      out += c;
    }
  }
  return out;
}
}  // namespace

void TextCursor::skip_spaces() {
  while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
}

bool TextCursor::at_end() {
  skip_spaces();
  return pos_ >= text_.size();
}

char TextCursor::peek() { return at_end() ? '\0' : text_[pos_]; }

bool TextCursor::accept(char c) {
  if (peek() != c || at_end()) return false;
  ++pos_;
  return true;
}

void TextCursor::expect(char c, std::string_view context) {
  if (!accept(c)) error("expected '", c, "' ", context, ", found ", describe_next());
}

std::string TextCursor::describe_next() {
  if (at_end()) return "end of line";
  size_t end = pos_ + 1;
  char first = text_[pos_];
  if (is_ident_char(first) || first == '-' || first == '.') {
    while (end < text_.size() && end - pos_ < 40 && is_number_char(text_[end], text_[end - 1]))
      ++end;
  }
  return "'" + printable(text_.substr(pos_, end - pos_)) + "'";
}

bool TextCursor::next_is_ident() { return is_ident_start_char(peek()); }

std::string_view TextCursor::peek_ident() {
  if (!next_is_ident()) return {};
  size_t end = pos_;
  while (end < text_.size() && is_ident_char(text_[end])) ++end;
  return text_.substr(pos_, end - pos_);
}

bool TextCursor::next_is_number() {
  char c = peek();
  if (is_digit(c) || c == '-' || c == '.') return true;
  std::string_view id = peek_ident();
  return id == "inf" || id == "nan";
}

std::string TextCursor::ident(std::string_view what) {
  std::string_view id = peek_ident();
  if (id.empty()) error("expected ", what, ", found ", describe_next());
  pos_ += id.size();
  return std::string(id);
}

std::string TextCursor::path() {
  skip_spaces();
  size_t end = pos_;
  while (end < text_.size() && (is_ident_char(text_[end]) || text_[end] == '.')) ++end;
  if (end == pos_) error("expected a parameter path, found ", describe_next());
  std::string out(text_.substr(pos_, end - pos_));
  pos_ = end;
  return out;
}

char TextCursor::unescape(size_t& pos) {
  if (pos >= text_.size()) error("unterminated string: missing closing '\"'");
  char c = text_[pos++];
  switch (c) {
    case '"':
      return '"';
    case '\\':
      return '\\';
    case 'n':
      return '\n';
    case 't':
      return '\t';
    case 'r':
      return '\r';
    case 'x': {
      int v = 0;
      for (int k = 0; k < 2; ++k) {
        char h = pos < text_.size() ? text_[pos] : '\0';
        int digit = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : -1;
        if (digit < 0) error("expected two lowercase hex digits after '\\x' in a string");
        v = v * 16 + digit;
        ++pos;
      }
      return static_cast<char>(v);
    }
    default:
      error("unknown escape '\\", printable(std::string_view(&c, 1)),
            "' in a string (expected \\\" \\\\ \\n \\t \\r or \\xHH)");
  }
}

std::string TextCursor::quoted() {
  expect('"', "to open a string");
  std::string out;
  size_t pos = pos_;
  while (true) {
    if (pos >= text_.size()) error("unterminated string: missing closing '\"'");
    char c = text_[pos++];
    if (c == '"') break;
    out += (c == '\\') ? unescape(pos) : c;
  }
  pos_ = pos;
  return out;
}

NumberLiteral TextCursor::number() {
  skip_spaces();
  size_t start = pos_, end = pos_;
  if (end < text_.size() && text_[end] == '-') ++end;
  while (end < text_.size() && is_number_char(text_[end], end > start ? text_[end - 1] : ' '))
    ++end;
  std::string_view tok = text_.substr(start, end - start);
  std::string_view body = tok.substr(tok.empty() || tok[0] != '-' ? 0 : 1);
  NumberLiteral out;
  bool neg = tok.size() != body.size();
  if (body == "inf" || body == "nan") {
    out.d = body == "inf" ? (neg ? -INFINITY : INFINITY) : NAN;
  } else if (body.empty() || body.find_first_of(".eE") == std::string_view::npos) {
    auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), out.i);
    if (ec == std::errc::result_out_of_range)
      error("integer '", printable(tok), "' is out of range");
    if (ec != std::errc() || p != tok.data() + tok.size() || body.empty())
      error("expected a number, found ", describe_next());
    out.is_int = true;
  } else {
    auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), out.d);
    if (ec == std::errc::result_out_of_range)
      error("number '", printable(tok), "' is out of range");
    if (ec != std::errc() || p != tok.data() + tok.size() || !is_digit(body.back()))
      error("malformed number '", printable(tok), "'");
  }
  pos_ = end;
  return out;
}

}  // namespace fsdpc
