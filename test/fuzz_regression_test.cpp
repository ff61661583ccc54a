// Inputs a fuzz target (test/fuzz/) once failed on, kept in
// test/fuzz/regressions/<target>/: each must now fail with fsdpc::Error, the
// clear exit-2 path, through the function the target and the CLI call.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/json.h"
#include "ir/verifier.h"

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> regression_inputs(const std::string& target) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fs::path(FSDPC_SOURCE_DIR) / "test/fuzz/regressions" / target))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

}  // namespace

TEST_CASE("fuzz regressions: trace JSON that nlohmann_json rejects past parse errors fails with fsdpc::Error") {
  const std::vector<fs::path> files = regression_inputs("trace_json");
  REQUIRE(!files.empty());
  for (const fs::path& f : files) {
    INFO(f.string());
    const std::string text = read_file(f);
    REQUIRE(!text.empty());
    // number-overflow.json: a shape entry past double's range, once an
    // uncaught nlohmann::json out_of_range (std::terminate in fsdpc print).
    CHECK_THROWS_MATCHES(fsdpc::verify(fsdpc::trace_from_json(text, f.filename().string())), fsdpc::Error,
                         Catch::Matchers::Predicate<fsdpc::Error>([&](const fsdpc::Error& e) {
                           return std::string(e.what()).starts_with(f.filename().string() + ": ");
                         }, "names the file"));
  }
}
