// libFuzzer target: a sharded checkpoint's model.safetensors.index.json, as
// `fsdpc train --init DIR` reads it (read_safetensors_index).
// fsdpc::Error is the clear exit-2 path; anything else escaping is a finding.
#include <cstddef>
#include <cstdint>

#include "ir/error.h"
#include "runtime/io/safetensors.h"
#include "test/fuzz/fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fsdpc::fuzz::input_folder().write("model.safetensors.index.json", data, size);
  try {
    fsdpc::read_safetensors_index(path);
  } catch (const fsdpc::Error&) {
  }
  return 0;
}
