// The readers of safetensors files, index and config JSON and token data take
// a path, as the CLI gives them: a fuzz input is written to a file of this
// process first (in $TMPDIR, removed at exit) and the path handed over.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace fsdpc::fuzz {

class InputFolder {
 public:
  InputFolder() {
    const char* tmp = std::getenv("TMPDIR");
    dir_ = std::filesystem::path(tmp && *tmp ? tmp : "/tmp") / ("fsdpc-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  ~InputFolder() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  // Writes the bytes to <folder>/<name> and returns its path.
  std::string write(const std::string& name, const uint8_t* data, size_t size) const {
    const std::filesystem::path path = dir_ / name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    out.close();
    if (!out) std::abort();  // the harness itself failed: not a finding in fsdpc
    return path.string();
  }

 private:
  std::filesystem::path dir_;
};

inline const InputFolder& input_folder() {
  static const InputFolder folder;
  return folder;
}

}  // namespace fsdpc::fuzz
