// Training parity: gpt2-tiny under zero3 trains to the same losses with its
// regions fused and compiled (--fusion auto) as without, and the fused step
// runs regions at all: in process, and through `mpirun -n N fsdpc train`
// (20 AdamW steps with clipping) at N = 1 and 2.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "executors/fusion/fusion_kernel.h"
#include "frontend/jit.h"
#include "frontend/models.h"

using namespace fsdpc;

namespace {

std::vector<HostTensor> tokens(int64_t batch, int64_t seq, int step) {
  std::vector<int64_t> idx(static_cast<size_t>(batch * seq)), targets(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) {
    idx[i] = static_cast<int64_t>((i * 37 + 11 + 13 * step) % 256);
    targets[i] = static_cast<int64_t>((i * 53 + 5 + 7 * step) % 256);
  }
  return {HostTensor::ints({batch, seq}, idx), HostTensor::ints({batch, seq}, targets)};
}

struct Run {
  std::vector<double> losses;
  double seconds = 0;  // the steps after the first (which compiles)
};

Run train(const std::string& fusion, int steps) {
  auto model = make_model("gpt2-tiny");
  JitOptions o;
  o.capture.batch = 4;
  o.capture.seq = 32;
  o.pipeline.mesh = flat_mesh(1);
  o.pipeline.strategy = Strategy::zero3;
  o.pipeline.bucketing = true;
  o.engine.optimizer.kind = OptimizerOptions::Kind::adamw;
  o.engine.optimizer.lr = 1e-3;
  o.engine.seed = 3;
  o.engine.fusion = fusion;
  auto compiled = jit(*model, o);
  Run r;
  for (int s = 0; s < steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    r.losses.push_back(compiled->train_step(tokens(4, 32, s)).loss);
    if (s > 0) r.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return r;
}

}  // namespace

TEST_CASE("fusion: gpt2-tiny zero3 trains to the unfused losses (1e-5)", "[fusion][train]") {
  const int steps = 6;
  const Run plain = train("none", steps);
  const int64_t compiled_before = fusion::jit_cache_stats().compiled;
  const Run fused = train("auto", steps);
  const fusion::JitCacheStats stats = fusion::jit_cache_stats();
  CHECK(stats.compiled > compiled_before);
  CHECK(stats.hits > 0);
  for (int s = 0; s < steps; ++s) {
    INFO("step " << s << ": unfused " << plain.losses[s] << ", fused " << fused.losses[s]);
    CHECK(std::isfinite(fused.losses[s]));
    CHECK(std::abs(fused.losses[s] - plain.losses[s]) <= 1e-5 * std::max(1.0, std::abs(plain.losses[s])));
  }
  CHECK(fused.losses.back() < fused.losses.front());
  double worst = 0;
  for (int s = 0; s < steps; ++s) worst = std::max(worst, std::abs(fused.losses[s] - plain.losses[s]));
  std::printf("losses %.6f -> %.6f, fused vs unfused at most %.2e apart\n", plain.losses.front(),
              plain.losses.back(), worst);
  // For people, not checked: the shared machine's timings are noisy.
  std::printf("gpt2-tiny zero3, %d steps after the first: unfused %.3f s, fused %.3f s; %lld regions compiled "
              "in %.3f s, %lld cache hits\n",
              steps - 1, plain.seconds, fused.seconds, static_cast<long long>(stats.compiled), stats.compile_s,
              static_cast<long long>(stats.hits));
}

namespace {

// `mpirun -n np fsdpc train` for 20 AdamW steps with clipping; the per-step
// losses of its --log-json, and its output.
std::vector<double> train_cli(int np, const std::string& fusion, std::string& output) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fsdpc-fusion-train-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string tag = "np" + std::to_string(np) + "-" + fusion;
  const std::filesystem::path log = dir / (tag + ".jsonl"), out = dir / (tag + ".out");
  const std::string cmd = std::string(FSDPC_MPIEXEC) + " -n " + std::to_string(np) +
                          " --oversubscribe --allow-run-as-root '" + FSDPC_BIN +
                          "' train --model gpt2-tiny --seq 16 --batch 8 --steps 20 --strategy zero3 "
                          "--optimizer adamw --lr 3e-3 --weight-decay 0.01 --clip 1.0 --seed 5 --fusion " +
                          fusion + " --log-json '" + log.string() + "' >'" + out.string() + "' 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream o(out);
  std::stringstream all;
  all << o.rdbuf();
  output = all.str();
  INFO(cmd << "\n" << output);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  std::vector<double> losses;
  std::ifstream l(log);
  for (std::string line; std::getline(l, line);) losses.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  std::filesystem::remove_all(dir);
  return losses;
}

}  // namespace

TEST_CASE("fusion: mpirun fsdpc train, 20 AdamW steps with clipping, fused matches unfused to 1e-5 at N = 1, 2",
          "[fusion][mpi][train]") {
  for (int np : {1, 2}) {
    std::string plain_out, fused_out;
    const std::vector<double> plain = train_cli(np, "none", plain_out);
    const std::vector<double> fused = train_cli(np, "auto", fused_out);
    INFO("np " << np << "\n" << fused_out);
    REQUIRE(plain.size() == 20);
    REQUIRE(fused.size() == plain.size());
    CHECK(plain.back() < plain.front());  // it learns
    double worst = 0;
    for (size_t s = 0; s < plain.size(); ++s) {
      INFO("step " << s << ": unfused " << plain[s] << ", fused " << fused[s]);
      CHECK(fused[s] == Approx(plain[s]).epsilon(1e-5));
      worst = std::max(worst, std::abs(fused[s] - plain[s]) / std::abs(plain[s]));
    }
    std::printf("np %d: losses %.6f -> %.6f, fused vs unfused at most %.2e relative\n", np, plain.front(),
                plain.back(), worst);
  }
}
