// Training parity through the CLI as users run it: `mpirun -n N fsdpc train`
// on gpt2-tiny, 20 AdamW steps with clipping, --fusion auto against --fusion
// none, zero3 at N = 1 and 2 and hybrid on a 2x2 mesh; and the run reports
// what it compiled. Its
// own file: a process that has initialised MPI (as the in-process training
// test does) cannot launch mpirun.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "test/run_cli.h"
#include "test/scratch.h"

namespace {

// `mpirun -n np fsdpc train` for 20 AdamW steps with clipping; the per-step
// losses of its --log-json, and its output.
std::vector<double> train_cli(int np, const std::string& strategy, const std::string& fusion, std::string& output) {
  const std::string tag = "np" + std::to_string(np) + "-" + fusion;  // one strategy per np
  const std::filesystem::path log = fsdpc::testing::scratch(tag + ".jsonl");
  const std::string args = "train --model gpt2-tiny --seq 16 --batch 8 --steps 20 " + strategy +
                           " --optimizer adamw --lr 3e-3 --weight-decay 0.01 --clip 1.0 --seed 5 --fusion " + fusion +
                           " --log-json '" + log.string() + "'";
  const fsdpc::testing::Run r = fsdpc::testing::run_fsdpc_mpi(np, args, {.merge = true});
  output = r.out;
  INFO("mpirun -n " << np << " fsdpc " << args << "\n" << output);
  REQUIRE(r.code == 0);
  std::vector<double> losses = fsdpc::testing::logged_losses(log.string());
  std::filesystem::remove(log);
  return losses;
}

}  // namespace

TEST_CASE("fusion: mpirun fsdpc train, 20 AdamW steps with clipping, fused matches unfused to 1e-5 at N = 1, 2 "
          "and on a 2x2 hybrid mesh",
          "[fusion][mpi][train]") {
  const std::vector<std::pair<int, std::string>> runs = {
      {1, "--strategy zero3"}, {2, "--strategy zero3"}, {4, "--strategy hybrid --mesh 2,2"}};
  for (const auto& [np, strategy] : runs) {
    std::string plain_out, fused_out;
    const std::vector<double> plain = train_cli(np, strategy, "none", plain_out);
    const std::vector<double> fused = train_cli(np, strategy, "auto", fused_out);
    INFO("np " << np << " " << strategy << "\n" << fused_out);
    // The run says what it compiled: at least one region, in some time.
    CHECK_THAT(fused_out, Catch::Contains(" fusion regions compiled in "));
    CHECK_THAT(fused_out, !Catch::Contains(", 0 fusion regions compiled"));
    CHECK_THAT(plain_out, !Catch::Contains("fusion regions compiled"));
    REQUIRE(plain.size() == 20);
    REQUIRE(fused.size() == plain.size());
    CHECK(plain.back() < plain.front());  // it learns
    double worst = 0;
    for (size_t s = 0; s < plain.size(); ++s) {
      INFO("step " << s << ": unfused " << plain[s] << ", fused " << fused[s]);
      CHECK(fused[s] == Approx(plain[s]).epsilon(1e-5));
      worst = std::max(worst, std::abs(fused[s] - plain[s]) / std::abs(plain[s]));
    }
    std::printf("np %d %s: losses %.6f -> %.6f, fused vs unfused at most %.2e relative\n", np, strategy.c_str(),
                plain.front(), plain.back(), worst);
  }
}
