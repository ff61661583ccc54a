// libFuzzer target: trace JSON loading, as `fsdpc print FILE.json` reads it
// (tools/cli_io.cpp load_trace: trace_from_json, then verify).
// fsdpc::Error is the clear exit-2 path; anything else escaping is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ir/error.h"
#include "ir/json.h"
#include "ir/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    fsdpc::Trace trace = fsdpc::trace_from_json(text, "<fuzz>");
    fsdpc::verify(trace);
  } catch (const fsdpc::Error&) {
  }
  return 0;
}
