// Learning-rate schedules: nanoGPT's get_lr at every step of every kind, the
// checks on their options, and through `fsdpc train`: the rate each step
// used (the "lr" of --log-json) and that a resumed run continues the
// schedule where the uninterrupted run was.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ir/error.h"
#include "runtime/lr_schedule.h"
#include "test/run_cli.h"
#include "test/scratch.h"

using namespace fsdpc;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

// nanoGPT's train.py get_lr, transcribed (cosine), and its linear variant.
double nanogpt_lr(int64_t it, double learning_rate, int64_t warmup_iters, int64_t lr_decay_iters, double min_lr,
                  const std::string& kind) {
  if (it < warmup_iters) return learning_rate * static_cast<double>(it + 1) / static_cast<double>(warmup_iters + 1);
  if (kind == "constant") return learning_rate;
  if (it > lr_decay_iters) return min_lr;
  const double decay_ratio = static_cast<double>(it - warmup_iters) / static_cast<double>(lr_decay_iters - warmup_iters);
  REQUIRE(decay_ratio >= 0);
  REQUIRE(decay_ratio <= 1);
  const double coeff = kind == "cosine" ? 0.5 * (1.0 + std::cos(M_PI * decay_ratio)) : 1.0 - decay_ratio;
  return min_lr + coeff * (learning_rate - min_lr);
}

using fsdpc::testing::scratch;

struct Records {
  int code = -1;
  std::string output;
  std::vector<nlohmann::json> steps;
};

Records train(int np, const std::string& flags, const std::string& tag) {
  const fs::path log = scratch(tag + ".jsonl");
  fs::remove(log);
  const fsdpc::testing::Run run = fsdpc::testing::run_fsdpc_mpi(
      np, "train --model gpt2-tiny --seq 16 " + flags + " --log-json '" + log.string() + "'", {.merge = true});
  Records r;
  r.code = run.code;
  r.output = run.out;
  std::ifstream l(log);
  for (std::string line; std::getline(l, line);) r.steps.push_back(nlohmann::json::parse(line));
  return r;
}

}  // namespace

TEST_CASE("lr schedules follow nanoGPT's get_lr at every step", "[lr_schedule]") {
  const double lr = 6e-4, min_lr = 6e-5;
  for (const std::string kind : {"constant", "cosine", "linear"})
    for (int64_t warmup : {0, 1, 10})
      for (int64_t decay : {11, 50}) {
        LrSchedule s{*parse_lr_schedule(kind), warmup, decay, min_lr};
        CHECK_NOTHROW(check_lr_schedule(s, lr));
        for (int64_t it = 0; it < decay + 5; ++it) {
          CAPTURE(kind, warmup, decay, it);
          CHECK(scheduled_lr(s, lr, it) == Approx(nanogpt_lr(it, lr, warmup, decay, min_lr, kind)).epsilon(1e-12));
        }
      }
  // The landmarks: warmup ends one step short of the peak, the peak is
  // where decay starts, the floor where it ends.
  const LrSchedule cosine{LrSchedule::Kind::cosine, 4, 12, 1e-4};
  CHECK(scheduled_lr(cosine, 1e-3, 0) == Approx(2e-4));
  CHECK(scheduled_lr(cosine, 1e-3, 3) == Approx(8e-4));
  CHECK(scheduled_lr(cosine, 1e-3, 4) == 1e-3);
  CHECK(scheduled_lr(cosine, 1e-3, 8) == Approx(5.5e-4));  // halfway: the mean of peak and floor
  CHECK(scheduled_lr(cosine, 1e-3, 12) == 1e-4);
  CHECK(scheduled_lr(cosine, 1e-3, 1000) == 1e-4);
  // The default is the base rate at every step, exactly.
  for (int64_t it : {0, 1, 7, 100000}) CHECK(scheduled_lr(LrSchedule{}, 3e-4, it) == 3e-4);
  CHECK(std::string(lr_schedule_name(LrSchedule::Kind::linear)) == "linear");
  CHECK_FALSE(parse_lr_schedule("step"));
}

TEST_CASE("lr schedule options out of range are rejected with the flag's name", "[lr_schedule]") {
  using K = LrSchedule::Kind;
  CHECK_THROWS_WITH(check_lr_schedule({K::cosine, -1, 10, 0}, 1e-3), Contains("--warmup-steps -1"));
  CHECK_THROWS_WITH(check_lr_schedule({K::cosine, 0, 10, 2e-3}, 1e-3), Contains("--min-lr 0.002: must be in [0, --lr 0.001]"));
  CHECK_THROWS_WITH(check_lr_schedule({K::linear, 0, 10, -1e-5}, 1e-3), Contains("--min-lr"));
  CHECK_THROWS_WITH(check_lr_schedule({K::linear, 10, 10, 0}, 1e-3), Contains("must exceed --warmup-steps 10"));
  CHECK_THROWS_WITH(check_lr_schedule({K::cosine, 0, 0, 0}, 1e-3), Contains("decay horizon"));
  // Constant has no horizon: a warmup as long as the run is fine.
  CHECK_NOTHROW(check_lr_schedule({K::constant, 50, 10, 0}, 1e-3));
}

TEST_CASE("fsdpc train logs the rate of every step, and a resumed run continues the schedule",
          "[mpi][lr_schedule][checkpoint]") {
  const std::string common = "--batch 4 --lr 1e-3 --min-lr 1e-4 --warmup-steps 2 --optimizer adamw";
  for (const std::string kind : {"cosine", "linear"}) {
    CAPTURE(kind);
    const Records whole = train(2, common + " --steps 6 --lr-schedule " + kind, "whole-" + kind);
    INFO(whole.output);
    REQUIRE(whole.code == 0);
    REQUIRE(whole.steps.size() == 6);
    for (int64_t it = 0; it < 6; ++it)
      CHECK(whole.steps[it]["lr"].get<double>() == Approx(nanogpt_lr(it, 1e-3, 2, 6, 1e-4, kind)).epsilon(1e-8));

    // Stop after 4 steps (the horizon still 6: --decay-steps), then resume.
    const fs::path ck = scratch("ck-" + kind);
    fs::remove_all(ck);
    const Records first = train(2, common + " --steps 4 --decay-steps 6 --lr-schedule " + kind + " --save '" + ck.string() + "'",
                                "first-" + kind);
    INFO(first.output);
    REQUIRE(first.code == 0);
    const Records resumed =
        train(2, common + " --steps 6 --lr-schedule " + kind + " --resume '" + ck.string() + "'", "resumed-" + kind);
    INFO(resumed.output);
    REQUIRE(resumed.code == 0);
    REQUIRE(resumed.steps.size() == 2);
    for (size_t k = 0; k < 2; ++k) {
      CHECK(resumed.steps[k]["step"] == 4 + k);
      CHECK(resumed.steps[k]["lr"].get<double>() == whole.steps[4 + k]["lr"].get<double>());
      CHECK(resumed.steps[k]["loss"].get<double>() == whole.steps[4 + k]["loss"].get<double>());
      CHECK(resumed.steps[k]["steps_done"] == 5 + k);
      CHECK(resumed.steps[k]["steps_total"] == 6);
    }
  }
}
