// libFuzzer target: any bytes encoded by the two byte-level BPE fixtures
// (test/tokenizer_fixtures.h: GPT-2's and Llama 3's splits), with and
// without special tokens read from the text. Invalid UTF-8 must be refused
// with fsdpc::Error; valid text must decode back to itself (byte-level BPE
// loses nothing), else the target aborts: a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "ir/error.h"
#include "test/tokenizer_fixtures.h"
#include "tokenizer/hf_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<fsdpc::HfTokenizer> tokenizers[] = {
      fsdpc::parse_hf_tokenizer_json(fsdpc::testing::kGpt2SplitJson, "gpt2.json"),
      fsdpc::parse_hf_tokenizer_json(fsdpc::testing::kLlama3SplitJson, "llama3.json")};
  if (size == 0) return 0;
  const fsdpc::HfTokenizer& tokenizer = *tokenizers[data[0] & 1];
  const bool parse_special = data[0] & 2;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const auto ids = tokenizer.encode(text, parse_special);
    if (tokenizer.decode(ids) != text) std::abort();
  } catch (const fsdpc::Error&) {
  }
  return 0;
}
