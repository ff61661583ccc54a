// What the advise tests share: fsdpc run with a hardware cache of the test's
// own, a CPU profile of round figures, and advise's JSON and its rows.
#pragma once

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "test/run_cli.h"
#include "test/scratch.h"

namespace fsdpc::testing {

// `fsdpc <args>`, with a cache folder of this test's own; `env`: more
// NAME=value settings for the command.
inline Run fsdpc_run(const std::string& args, const std::string& env = "") {
  return fsdpc::testing::run_fsdpc(args, {.env = "XDG_CACHE_HOME='" + scratch("cache").string() + "' " + env});
}

// The local profile for 2 ranks that advise cached in this test's folder
// ("" if none).
inline std::filesystem::path cached_two_rank_profile() {
  for (const auto& e : std::filesystem::directory_iterator(scratch("cache") / "fsdpc"))
    if (e.path().filename().string().find("-2ranks-") != std::string::npos) return e.path();
  return {};
}

// A profile of round figures for a CPU build: nothing measured, so the
// table is the same on every machine. Two ranks per node.
inline std::filesystem::path cpu_profile(const std::string& name = "cpu-test.json", int per_node = 2) {
  const std::filesystem::path p = scratch(name);
  auto fig = [](double v) { return "{\"value\": " + std::to_string(v) + ", \"source\": \"test\"}"; };
  auto link = [&](double bw) {
    return "{\"bandwidth\": " + fig(bw) + ", \"latency\": " + fig(1e-6) + ", \"sustained_fraction\": " + fig(1) + "}";
  };
  std::ofstream(p) << "{\"name\": \"cpu-test\", \"executor\": \"cpu\", \"precision\": \"f32\", \"gpus_per_node\": "
                   << fig(per_node) << ", \"compute\": {\"peak_flops_bf16\": " << fig(1e11)
                   << ", \"peak_flops_f32\": " << fig(1e11) << ", \"matmul_sustained_fraction\": " << fig(0.5)
                   << ", \"memory_bandwidth\": " << fig(1e10) << ", \"memory_sustained_fraction\": " << fig(0.5)
                   << "}, \"intra_node\": " << link(1e10) << ", \"inter_node\": " << link(1e9) << "}\n";
  return p;
}

inline nlohmann::json advise(const std::string& args) {
  const Run r = fsdpc_run("advise " + args + " --format json");
  INFO("fsdpc advise " << args << "\n" << r.err);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out);
}

// The candidate called `name` in advise's JSON.
inline nlohmann::json candidate_row(const nlohmann::json& plan, const std::string& name) {
  for (const nlohmann::json& c : plan["candidates"])
    if (c["candidate"] == name) return c;
  FAIL("no candidate " << name);
  return nlohmann::json();
}

}  // namespace fsdpc::testing
