// A cursor over one line of the trace text form: the lexical layer of
// ir/parser.cpp. Every error it raises is an fsdpc::Error "<file>:<line>: ...".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ir/error.h"

namespace fsdpc {

// A numeric literal: integers (no '.', 'e', inf, nan) stay integers.
struct NumberLiteral {
  bool is_int = false;
  int64_t i = 0;
  double d = 0;
  double as_double() const { return is_int ? static_cast<double>(i) : d; }
};

bool is_ident_start_char(char c);
bool is_ident_char(char c);

class TextCursor {
 public:
  TextCursor(std::string_view text, std::string_view file, int line)
      : text_(text), file_(file), line_(line) {}

  template <class... Parts>
  [[noreturn]] void error(const Parts&... parts) const {
    fail(file_, ":", line_, ": ", parts...);
  }

  int line() const { return line_; }
  bool at_end();        // nothing but spaces left
  char peek();          // next non-space character, '\0' at the end
  bool accept(char c);  // consumes `c` when it is next
  void expect(char c, std::string_view context);
  // The next token quoted for an error message, or "end of line".
  std::string describe_next();

  bool next_is_ident();
  bool next_is_number();  // a digit, '-' or '.' starts one; so do inf and nan
  std::string ident(std::string_view what);
  std::string quoted();  // a "..." string with escapes
  std::string path();    // a bare parameter path: [A-Za-z0-9_.]+
  NumberLiteral number();
  // The identifier ahead without consuming it ("" if none).
  std::string_view peek_ident();

 private:
  void skip_spaces();
  char unescape(size_t& pos);

  std::string_view text_;
  size_t pos_ = 0;
  std::string_view file_;
  int line_;
};

}  // namespace fsdpc
