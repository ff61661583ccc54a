// The golden-trace harness: compares a printed trace with a file under
// test/golden/ exactly. On a mismatch it reports a unified diff; with
// FSDPC_UPDATE_GOLDEN=1 it rewrites the file instead (read it before committing).
#pragma once

#include <string>

namespace fsdpc::testing {

struct GoldenResult {
  bool ok = false;
  std::string message;  // the diff, or why the file could not be read/written
};

GoldenResult check_golden(const std::string& name, const std::string& actual);

std::string golden_path(const std::string& name);
std::string read_file(const std::string& path);

}  // namespace fsdpc::testing
