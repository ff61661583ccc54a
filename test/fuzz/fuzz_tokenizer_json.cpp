// libFuzzer target: a tokenizer.json, as `fsdpc tokenize --tokenizer` and
// `fsdpc generate` read it (parse_hf_tokenizer_json, which checks every
// part), then a short mixed text encoded and decoded with what was read.
// fsdpc::Error is the clear exit-2 path; anything else escaping is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ir/error.h"
#include "tokenizer/hf_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto tokenizer = fsdpc::parse_hf_tokenizer_json(text, "tokenizer.json");
    const auto ids = tokenizer->encode("Hello wörld 12345 日本 👍🏽\n\n  <|endoftext|>x");
    tokenizer->decode(ids);
    tokenizer->decode(ids, /*skip_special=*/true);
    tokenizer->vocab_size();
  } catch (const fsdpc::Error&) {
  }
  return 0;
}
