// Golden file comparison with a unified diff from diff(1).
#include "test/golden.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fsdpc::testing {

std::string golden_path(const std::string& name) { return std::string(FSDPC_GOLDEN_DIR) + "/" + name; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {
std::string run_capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "(could not run diff)";
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

std::string unified_diff(const std::string& path, const std::string& actual) {
  auto tmp = std::filesystem::temp_directory_path() /
             ("fsdpc-actual-" + std::to_string(std::hash<std::string>{}(path)) + ".trace");
  {
    std::ofstream out(tmp, std::ios::binary);
    out << actual;
  }
  std::string diff = run_capture("diff -u '" + path + "' '" + tmp.string() + "' 2>&1");
  std::filesystem::remove(tmp);
  return diff;
}
}  // namespace

GoldenResult check_golden(const std::string& name, const std::string& actual) {
  std::string path = golden_path(name);
  const char* update = std::getenv("FSDPC_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << actual;
    if (!out) return {false, "cannot write " + path};
    return {true, "updated " + path};
  }
  if (!std::filesystem::exists(path))
    return {false, path + " does not exist; run with FSDPC_UPDATE_GOLDEN=1 to create it, then read it"};
  std::string expected = read_file(path);
  if (expected == actual) return {true, ""};
  return {false, "golden mismatch for " + path + " (FSDPC_UPDATE_GOLDEN=1 rewrites it):\n" +
                     unified_diff(path, actual)};
}

}  // namespace fsdpc::testing
