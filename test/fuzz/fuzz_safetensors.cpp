// libFuzzer target: a safetensors file, as `fsdpc train --init` and
// `--resume` open one (SafetensorsFile validates the whole header), then the
// row reads a rank's shard makes. The CLI reads rows only of tensors whose
// shape matched the model's, so rows are read here only for entries small
// enough to hold in memory. fsdpc::Error is the clear exit-2 path; anything
// else escaping is a finding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ir/error.h"
#include "runtime/io/safetensors.h"
#include "test/fuzz/fuzz_input_file.h"

namespace {

constexpr uint64_t kMaxElements = 1 << 16;

// Elements per row (a 0-d tensor is one row of one), or 0 when the tensor is
// empty or too large to read here.
uint64_t row_elements(const fsdpc::SafetensorsEntry& e) {
  uint64_t n = 1;
  for (size_t i = 0; i < e.shape.size(); ++i) {
    if (e.shape[i] <= 0) return 0;
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(e.shape[i]), &n) || n > kMaxElements) return 0;
  }
  return e.shape.empty() ? 1 : n / static_cast<uint64_t>(e.shape[0]);
}

void read_like_a_shard(const fsdpc::SafetensorsFile& file, const fsdpc::SafetensorsEntry& e) {
  const uint64_t per_row = row_elements(e);
  if (per_row == 0) return;
  const int64_t total = e.shape.empty() ? 1 : e.shape[0];
  // Two ranks' shards of ceil(total / 2) rows; the second ends in padding.
  const int64_t rows = (total + 1) / 2 + 1;
  std::vector<float> out(static_cast<size_t>(rows) * per_row);
  for (int64_t begin : {int64_t{0}, rows}) {
    try {
      file.read_rows_f32(e, begin, rows, out.data());
    } catch (const fsdpc::Error&) {  // a dtype that does not read as float
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fsdpc::fuzz::input_folder().write("model.safetensors", data, size);
  try {
    fsdpc::SafetensorsFile file(path);
    for (const fsdpc::SafetensorsEntry& e : file.entries()) read_like_a_shard(file, e);
  } catch (const fsdpc::Error&) {
  }
  return 0;
}
