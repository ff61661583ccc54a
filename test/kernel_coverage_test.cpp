// The GPU kernel tests' coverage, checked without a GPU: the ops they declare
// they compare against the CPU executor (test/gpu/kernel_coverage.h) are
// exactly the ops with a compute kernel: those of executors/kernel_families.def
// and every elementwise op, whose kernel may be generated from its scalar
// expression (ir/scalar_exprs.def) instead, each declared by one test
// and named in that test's source. On a GPU each test's main then checks
// that its run compared every op it declares (ggml's test-backend-ops rule).
#include <catch2/catch.hpp>

#include <cctype>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gpu/kernel_coverage.h"
#include "ir/ops.h"
#include "test/op_samples.h"

using namespace fsdpc;

namespace {

// op -> kernel family, for every op with a compute kernel: an elementwise op
// without a family row runs its scalar expression (expr_kernel).
const std::map<OpId, std::string> kFamilies = [] {
  std::map<OpId, std::string> m = {
#define FSDPC_KERNEL(op, kernel) {OpId::op, #kernel},
#include "executors/kernel_families.def"
#undef FSDPC_KERNEL
  };
  for (int i = 0; i < kNumOps; ++i)
    if (op_info(static_cast<OpId>(i)).category == OpCategory::elementwise) m.emplace(static_cast<OpId>(i), "expr_kernel");
  return m;
}();

// op -> its enum spelling, as the GPU tests' sources write it (OpId::Neg).
const std::map<OpId, std::string> kEnumNames = {
#define FSDPC_ENUM_NAME(op, ...) {OpId::op, "OpId::" #op},
    FSDPC_OPS(FSDPC_ENUM_NAME)
#undef FSDPC_ENUM_NAME
};

std::string source(const std::string& file) {
  std::ifstream in(std::string(FSDPC_SOURCE_DIR) + "/test/gpu/" + file);
  REQUIRE(in);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Whether `text` holds `word` as a whole token (OpId::Ne is not OpId::Neg).
bool names(const std::string& text, const std::string& word) {
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const size_t end = at + word.size();
    if (end == text.size() || !(std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_')) return true;
  }
  return false;
}

// Each test file with the ops it declares by name; gpu_kernels_test.cpp also
// declares every elementwise op, drawn by kind from the op-sample table.
const std::vector<std::pair<std::string, std::vector<OpId>>> kDeclared = {
    {"gpu_kernels_test.cpp", {std::begin(gpu_test::kComparedByKernelsTest), std::end(gpu_test::kComparedByKernelsTest)}},
    {"gpu_nn_kernels_test.cpp",
     {std::begin(gpu_test::kComparedByNnKernelsTest), std::end(gpu_test::kComparedByNnKernelsTest)}}};

std::vector<std::pair<std::string, std::vector<OpId>>> declared_with_elementwise() {
  auto all = kDeclared;
  for (OpId op : test::elementwise_ops()) all[0].second.push_back(op);
  return all;
}

}  // namespace

TEST_CASE("every op of kernel_families.def is declared by exactly one GPU kernel test", "[coverage]") {
  REQUIRE_FALSE(kFamilies.empty());
  std::map<OpId, std::string> declared_by;
  for (const auto& [file, ops] : declared_with_elementwise())
    for (OpId op : ops) {
      INFO(file << " declares " << op_name(op));
      CHECK(kFamilies.count(op) == 1);  // not an op without a compute kernel, nor a stale entry
      CHECK(declared_by.emplace(op, file).second);  // declared once
    }
  for (const auto& [op, family] : kFamilies) {
    INFO(op_name(op) << " (" << family << ") is in no list of test/gpu/kernel_coverage.h: no GPU test compares it");
    CHECK(declared_by.count(op) == 1);
  }
}

TEST_CASE("each GPU kernel test's source names every op it declares", "[coverage]") {
  for (const auto& [file, ops] : kDeclared) {
    const std::string text = source(file);
    for (OpId op : ops) {
      INFO(file << " declares " << op_name(op) << " but never writes " << kEnumNames.at(op));
      CHECK(names(text, kEnumNames.at(op)));
    }
  }
}
