// Whole files in and out, and the writable-path checks (runtime/io/files.h).
#include "runtime/io/files.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/error.h"

namespace fsdpc {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail(path, ": is a folder, expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open (", std::strerror(errno), ")");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail(path, ": read failed");
  return ss.str();
}

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(path, ": cannot open for writing (", std::strerror(errno), ")");
    out << text;
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      fail(path, ": write failed");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    fail(path, ": cannot replace (", ec.message(), ")");
  }
}

namespace {

// The nearest ancestor of `p` that exists ("." for a relative path with none).
fs::path nearest_existing(fs::path p) {
  std::error_code ec;
  p = p.lexically_normal();
  while (!p.empty() && !fs::exists(p, ec)) p = p.parent_path();
  return p.empty() ? fs::path(".") : p;
}

void check_folder_writable(const std::string& option, const std::string& path, const fs::path& folder) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec))
    fail(option, " ", path, ": ", folder.string(), " is not a folder");
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    fail(option, " ", path, ": cannot write into ", folder.string(), " (", std::strerror(errno), ")");
}

}  // namespace

void check_writable_file(const std::string& option, const std::string& path) {
  std::error_code ec;
  if (path.empty()) fail(option, ": expected a file name, got nothing");
  if (fs::is_directory(path, ec)) fail(option, " ", path, ": is a folder; expected a file name");
  const fs::path parent = fs::path(path).parent_path();
  const fs::path folder = parent.empty() ? fs::path(".") : parent;
  if (!fs::exists(folder, ec)) fail(option, " ", path, ": the folder ", folder.string(), " does not exist");
  check_folder_writable(option, path, folder);
  if (fs::exists(path, ec) && ::access(path.c_str(), W_OK) != 0)
    fail(option, " ", path, ": cannot replace it (", std::strerror(errno), ")");
}

void check_writable_folder(const std::string& option, const std::string& path) {
  std::error_code ec;
  if (path.empty()) fail(option, ": expected a folder, got nothing");
  if (fs::exists(path, ec) && !fs::is_directory(path, ec))
    fail(option, " ", path, ": is a file, not a folder; expected a folder to write into");
  check_folder_writable(option, path, nearest_existing(path));
}

}  // namespace fsdpc
