// --gather-dtype int8 (passes/quantize_gathers.h): the parameters' gathers
// move int8 codes, on every sharded strategy, bucketed or not, in f32 and
// bf16, with --keep-gathered; training follows the unquantized gathers to
// the codes' rounding (the gradients and the master weights are exact), the
// gathers' bytes are a quarter of f32's, and no_shard is refused.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test/run_cli.h"
#include "test/scratch.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using fsdpc::testing::scratch;

namespace {

std::vector<double> losses(int np, const std::string& flags, const std::string& tag) {
  const fs::path log = scratch("int8-" + tag + ".jsonl");
  fs::remove(log);
  const std::string args =
      "train --model gpt2-tiny --seq 16 --batch 12 --seed 3 --steps 6 --lr 3e-3 " + flags + " --log-json '" +
      log.string() + "'";
  const fsdpc::testing::Run run = fsdpc::testing::run_fsdpc_mpi(np, args, {.merge = true});
  INFO("mpirun -n " << np << " fsdpc " << args << "\n" << run.out);
  REQUIRE(run.code == 0);
  std::vector<double> out;
  std::ifstream l(log);
  for (std::string line; std::getline(l, line);) out.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  REQUIRE(out.size() == 6);
  return out;
}

// The all_gather row of `dump --stats`: its bytes sent per rank.
long long gathered_bytes(const std::string& flags) {
  const fsdpc::testing::Run r = fsdpc::testing::run_fsdpc("dump " + flags + " --stats", {.merge = true});
  REQUIRE(r.code == 0);
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, std::regex(R"(all_gather\s+\d+\s+(\d+) B)")));
  return std::stoll(m[1]);
}

}  // namespace

// The first step's loss sees only the forward's gathered weights, each
// within half a code step (1/254 of its block's largest weight) of the
// exact one; later steps also carry the gradients computed from them. The
// runs must differ (the codes did round) and stay within 0.2%.
TEST_CASE("int8 gathers train as the parameters' own gathers do, on every sharded strategy", "[mpi][int8]") {
  struct Layout {
    int np;
    const char* flags;
  };
  for (const Layout& l : {Layout{2, "--strategy zero3"}, Layout{4, "--strategy zero3 --bucketing unit"},
                          Layout{2, "--strategy zero2 --bucketing unit"}, Layout{4, "--strategy hybrid --mesh 2,2"},
                          Layout{4, "--strategy hybrid_zero2 --mesh 2,2 --bucketing unit"},
                          Layout{2, "--strategy zero3 --bucketing unit --precision bf16"},
                          Layout{2, "--strategy zero3 --grad-accum 3 --keep-gathered"}}) {
    INFO(l.np << " ranks: " << l.flags);
    const std::string tag = std::to_string(l.np) + std::regex_replace(l.flags, std::regex("[^a-z0-9]+"), "-");
    const std::vector<double> exact = losses(l.np, l.flags, tag + "param");
    const std::vector<double> int8 = losses(l.np, std::string(l.flags) + " --gather-dtype int8", tag + "int8");
    bool differ = false;
    for (size_t i = 0; i < exact.size(); ++i) {
      CHECK(int8[i] == Approx(exact[i]).epsilon(2e-3));
      differ = differ || int8[i] != exact[i];
    }
    CHECK(differ);
  }
}

TEST_CASE("int8 gathers move a quarter of f32's bytes and half of bf16's, plus the scales", "[int8]") {
  // GPT-2's rows (768 to 3072 wide, each parameter's shard quantized row by
  // row before its unit is packed) take a scale per block of 256 codes.
  const std::string model = "--model gpt2 --batch 1 --seq 64 --world-size 2 --strategy zero3 --bucketing unit";
  const long long f32 = gathered_bytes(model), int8 = gathered_bytes(model + " --gather-dtype int8");
  const long long bf16 = gathered_bytes(model + " --precision bf16");
  const long long bf16_int8 = gathered_bytes(model + " --precision bf16 --gather-dtype int8");
  // One f32 scale per 256 codes: 1 + 4/256 bytes a value.
  CHECK(int8 >= f32 / 4);
  CHECK(int8 <= f32 / 4 * 1.02);
  CHECK(bf16_int8 == int8);  // the cast's f32 source is what is coded
  CHECK(bf16_int8 <= bf16 / 2 * 1.02);
}

TEST_CASE("fsdpc dump shows the quantized gathers, and no_shard is refused", "[int8]") {
  const fsdpc::testing::Run r = fsdpc::testing::run_fsdpc(
      "dump --model mlp --world-size 2 --strategy zero3 --gather-dtype int8 --stage quantize_gathers", {.merge = true});
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("= quantize(t_0_weight, block=256)") && Contains("i8[64, 68]") &&
                        Contains("dequantize(") && Contains("Constructed by quantize_gathers"));
  // The backward regathers only what it needs, quantized too; its gradients are not.
  const size_t backward = r.out.find("def backward(");
  REQUIRE(backward != std::string::npos);
  const std::string bwd = r.out.substr(backward);
  CHECK_THAT(bwd, Contains("reduce_scatter("));
  int quantized = 0;
  const std::regex quantize_of(R"(= quantize\((\w+),)");  // outlives the iterators, which point to it
  for (std::sregex_iterator it(bwd.begin(), bwd.end(), quantize_of), end; it != end; ++it) {
    CHECK((*it)[1].str().rfind("t_", 0) == 0);  // a parameter shard, never a gradient
    ++quantized;
  }
  CHECK(quantized == 1);

  const fsdpc::testing::Run bad = fsdpc::testing::run_fsdpc(
      "train --model mlp --steps 1 --strategy no_shard --gather-dtype int8", {.merge = true});
  CHECK(bad.code == 2);
  CHECK_THAT(bad.out, Contains("--strategy no_shard gathers none"));
  const fsdpc::testing::Run unknown =
      fsdpc::testing::run_fsdpc("train --model mlp --steps 1 --gather-dtype int4", {.merge = true});
  CHECK(unknown.code == 2);
  CHECK_THAT(unknown.out, Contains("--gather-dtype"));
}
