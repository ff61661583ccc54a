// What the training tests on a GPU share: 10 AdamW steps of gpt2-tiny run by
// the built CLI (optionally under a launcher such as mpirun), their losses read
// from --log-json, and a step-by-step comparison of two runs' losses.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_paths.h"

namespace fsdpc::gpu_test {

namespace fs = std::filesystem;

// The losses of `launcher fsdpc train ... flags`; fails the case, showing the
// command and its output, unless it exits 0 with 10 steps logged.
inline std::vector<double> train(const std::string& launcher, const std::string& flags, const std::string& tag) {
  const fs::path dir = fs::temp_directory_path() / ("fsdpc-gpu-train-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path log = dir / (tag + ".jsonl"), out = dir / (tag + ".out");
  const std::string cmd = launcher + "'" + fsdpc_bin() +
                          "' train --model gpt2-tiny --seq 32 --batch 8 --steps 10 --optimizer adamw --lr 1e-3"
                          " --clip 1.0 --weight-decay 0.01 --seed 3 " +
                          flags + " --log-json '" + log.string() + "' >'" + out.string() + "' 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream o(out);
  std::stringstream text;
  text << o.rdbuf();
  INFO(cmd << "\n" << text.str());
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  std::vector<double> losses;
  std::ifstream l(log);
  for (std::string line; std::getline(l, line);) losses.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  REQUIRE(losses.size() == 10);
  return losses;
}

// got[i] == want[i] to rtol, step by step.
inline void check_losses(const std::vector<double>& got, const std::vector<double>& want, double rtol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("step " << i);
    CHECK(got[i] == Approx(want[i]).epsilon(rtol));
  }
}

}  // namespace fsdpc::gpu_test
