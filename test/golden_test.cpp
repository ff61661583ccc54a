// Golden traces: the captured built-in models are pinned as text, and every
// golden file must survive print(parse(text)) == text and a JSON round trip.
#include <catch2/catch.hpp>
#include <filesystem>

#include "frontend/models/registry.h"
#include "ir/json.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "test/golden.h"

using namespace fsdpc;

namespace {
std::string captured(const std::string& model) {
  auto m = make_model(model);
  return print_trace(capture(*m));
}

std::vector<std::filesystem::path> golden_files() {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(FSDPC_GOLDEN_DIR))
    if (e.path().extension() == ".trace") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}
}  // namespace

TEST_CASE("captured mlp matches its golden trace", "[golden]") {
  auto r = testing::check_golden("mlp.trace", captured("mlp"));
  INFO(r.message);
  CHECK(r.ok);
}

TEST_CASE("captured gpt2-tiny matches its golden trace", "[golden]") {
  auto r = testing::check_golden("gpt2-tiny.trace", captured("gpt2-tiny"));
  INFO(r.message);
  CHECK(r.ok);
}

TEST_CASE("every golden file round-trips through the parser and JSON", "[golden]") {
  auto files = golden_files();
  REQUIRE(files.size() >= 2);
  for (const auto& path : files) {
    // A pipeline golden holds several traces, one per stage, separated by
    // a blank line.
    std::string all = testing::read_file(path.string());
    std::vector<std::string> texts;
    for (size_t start = 0; start < all.size();) {
      size_t end = all.find("\n\n# Constructed by", start);
      end = end == std::string::npos ? all.size() : end + 1;
      texts.push_back(all.substr(start, end - start));
      start = end + (end < all.size());
    }
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string& text = texts[i];
      INFO(path.string() << ", trace " << i + 1 << " of " << texts.size());
      Trace t = parse_trace(text, path.string());
      CHECK_NOTHROW(verify(t));
      CHECK(print_trace(t) == text);
      Trace back = trace_from_json(trace_to_json(t), path.string());
      CHECK(back == t);
      CHECK(print_trace(back) == text);
    }
  }
}
