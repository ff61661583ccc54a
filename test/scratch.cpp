#include "test/scratch.h"

#include <errno.h>  // program_invocation_short_name (glibc)
#include <unistd.h>

#include <fstream>

namespace fsdpc::testing {

std::filesystem::path scratch_dir() {
  static const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("fsdpc-" + std::string(program_invocation_short_name) + "-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

std::filesystem::path scratch(const std::string& name) { return scratch_dir() / name; }

std::filesystem::path write_scratch(const std::string& name, const std::string& content) {
  const std::filesystem::path p = scratch(name);
  std::ofstream(p, std::ios::binary) << content;
  return p;
}

}  // namespace fsdpc::testing
