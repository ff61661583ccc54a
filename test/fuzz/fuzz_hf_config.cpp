// libFuzzer target: a Hugging Face config.json, as `fsdpc train --config`
// and `--init DIR` read it (gpt2_config_from_file, which validates it).
// fsdpc::Error is the clear exit-2 path; anything else escaping is a finding.
#include <cstddef>
#include <cstdint>

#include "frontend/models/gpt2/gpt2.h"
#include "ir/error.h"
#include "test/fuzz/fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fsdpc::fuzz::input_folder().write("config.json", data, size);
  try {
    fsdpc::gpt2_config_from_file(path);
  } catch (const fsdpc::Error&) {
  }
  return 0;
}
