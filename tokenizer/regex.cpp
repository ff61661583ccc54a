// PCRE2 behind the Regex class. The match data, match context and JIT stack
// are per thread (PCRE2 needs one per concurrent match) and made once: the
// pre-tokenizer matches once per word. The JIT stack is larger than the
// default 32 KiB so long runs of whitespace (\s+(?!\S) backtracks over
// them) do not run out; a limit still hit is an fsdpc::Error, never ids
// that differ.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include "ir/error.h"

namespace fsdpc {
namespace {

constexpr size_t kJitStackMax = size_t{8} << 20;

struct MatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 << 10, kJitStackMax, nullptr);
  MatchState() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~MatchState() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

bool regex_jit_available() {
  uint32_t jit = 0;
  pcre2_config(PCRE2_CONFIG_JIT, &jit);
  return jit != 0;
}

Regex::Regex(const std::string& pattern, const std::string& where, bool literal) : pattern_(pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &error,
                                   &offset, nullptr);
  if (code == nullptr)
    fail(where, ": the regular expression '", pattern, "' does not compile (PCRE2, at offset ", offset, "): ",
         pcre2_message(error));
  if (regex_jit_available()) pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // else pcre2_match interprets
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

bool Regex::find(std::string_view subject, size_t start, size_t& begin, size_t& end) const {
  thread_local MatchState state;
  const int rc = pcre2_match(static_cast<pcre2_code*>(code_), reinterpret_cast<PCRE2_SPTR>(subject.data()),
                             subject.size(), start, PCRE2_NO_UTF_CHECK, state.data, state.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0)
    fail("the regular expression '", pattern_, "' failed on ", subject.size(), " bytes of text (PCRE2): ",
         pcre2_message(rc));
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
  begin = ovector[0];
  end = ovector[1];
  return true;
}

}  // namespace fsdpc
