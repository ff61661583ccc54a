// Checkpoints in Hugging Face's safetensors format: a reader that validates the
// whole header on open and reads only the rows of a tensor a rank's shard
// needs, an atomic F32 writer, and the sharded checkpoint's index.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ir/types.h"

namespace fsdpc {

// One tensor of a file. begin/end are absolute file offsets (the header's
// data_offsets plus 8 plus the header length).
struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // as the file spells it: "F32", "BF16", "I64", ...
  Shape shape;
  uint64_t begin = 0, end = 0;
};

// A safetensors file opened read-only. The constructor validates every entry
// of the header (dtype, shape, offsets in bounds, byte sizes, no overlaps) and
// throws fsdpc::Error "<path>: <what>" on the first problem, so later reads
// can trust the entries. The data region is never read up front.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // Sorted by name.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  // nullptr when the file has no tensor of that name.
  const SafetensorsEntry* find(std::string_view name) const;
  // The optional "__metadata__" object; empty when absent.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Reads rows [row_begin, row_begin + rows) of `e` (one of entries()) into
  // `out` as float, converting F32, F16 and BF16 exactly. A row is one index
  // of dim 0; a 0-d tensor has one row of one element. Rows at or past
  // shape[0] are the last shard's padding (shard_rows(), passes/fsdp.h) and
  // get 0. Only the bytes of the rows asked for are read from the file.
  void read_rows_f32(const SafetensorsEntry& e, int64_t row_begin, int64_t rows, float* out) const;

 private:
  void read_at(uint64_t offset, void* dst, uint64_t size) const;

  std::string path_;
  int fd_ = -1;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// A float32 tensor to write; `data` holds numel(shape) floats.
struct SafetensorsTensor {
  std::string name;
  Shape shape;
  const float* data = nullptr;
};

// Writes `tensors` as F32 with `metadata` (omitted when empty) to `path`
// atomically: the bytes go to `path` + ".tmp", which is fsynced and renamed
// over `path`, so a crash or error never leaves a partial file there. Header
// keys are sorted by name, the header is space-padded so the data starts
// 8-byte aligned, and the data is contiguous in name order. Throws
// fsdpc::Error on duplicate names or any I/O failure (the temp file is
// removed).
void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// A sharded checkpoint's index (model.safetensors.index.json:
// {"metadata": {...}, "weight_map": {tensor: file}}).
struct SafetensorsIndex {
  std::map<std::string, std::string> weight_map;  // tensor -> absolute file path
};

// Parses the index at `path`; files resolve relative to its folder. Throws
// fsdpc::Error "<path>: <what>" on a missing file, bad JSON or a malformed
// weight_map.
SafetensorsIndex read_safetensors_index(const std::string& path);

}  // namespace fsdpc
