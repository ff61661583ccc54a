// DiLoCo (--outer-steps, passes/outer_step.h, runtime/engine_outer.cpp)
// through `mpirun fsdpc train` as users run it, on gpt2-tiny:
// - it is the same mathematics as synchronous training where it must be:
//   with H = 1, outer lr 1, no outer momentum and plain SGD inside, the
//   averaged inner step is the synchronous step, for every hybrid layout;
//   with one replica, outer lr 1 and no momentum, the anchor follows the
//   parameters whatever H and the inner optimizer;
// - otherwise its losses do not depend on how each replica is laid out (hybrid,
//   hybrid_zero2, one rank, tp 2, two pipeline stages), and differ from
//   synchronous training;
// - a bf16 or int8 outer exchange rounds each replica's change, and only that;
// - a resume in the middle of an outer round continues bit for bit; a
//   checkpoint whose replicas disagree is refused where it cannot continue;
// - bad flags are refused with exit code 2, naming the flag.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test/run_cli.h"
#include "test/scratch.h"

namespace fs = std::filesystem;
using Catch::Contains;

namespace {

using fsdpc::testing::scratch;

struct Trained {
  std::vector<double> losses;
  nlohmann::json state;  // --save-state: the gathered parameters
};

const std::string kCommon = "train --model gpt2-tiny --seq 16 --batch 12 --seed 5 ";

Trained train(int np, const std::string& flags, const std::string& tag) {
  const fs::path log = scratch("diloco-" + tag + ".jsonl"), state = scratch("diloco-" + tag + ".json");
  fs::remove(log);
  const std::string args =
      kCommon + flags + " --log-json '" + log.string() + "' --save-state '" + state.string() + "'";
  const fsdpc::testing::Run run = fsdpc::testing::run_fsdpc_mpi(np, args, {.merge = true});
  INFO("mpirun -n " << np << " fsdpc " << args << "\n" << run.out);
  REQUIRE(run.code == 0);
  Trained t;
  std::ifstream l(log);
  for (std::string line; std::getline(l, line);) t.losses.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  std::ifstream s(state);
  t.state = nlohmann::json::parse(s);
  return t;
}

// ||a - b|| / ||a|| over every weight, as one vector.
double relative_distance(const nlohmann::json& a, const nlohmann::json& b) {
  double norm2 = 0, diff2 = 0;
  for (auto it = a.begin(); it != a.end(); ++it) {
    const auto& x = it.value()["data"];
    const auto& y = b.at(it.key())["data"];
    REQUIRE(x.size() == y.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const double d = x[i].get<double>() - y[i].get<double>();
      norm2 += x[i].get<double>() * x[i].get<double>();
      diff2 += d * d;
    }
  }
  return std::sqrt(diff2 / norm2);
}

void check_losses(const Trained& want, const Trained& got) {
  REQUIRE(got.losses.size() == want.losses.size());
  for (size_t i = 0; i < want.losses.size(); ++i) CHECK(got.losses[i] == Approx(want.losses[i]).epsilon(1e-5));
}

}  // namespace

TEST_CASE("DiLoCo with H = 1, outer lr 1, no outer momentum and SGD inside is synchronous training",
          "[mpi][diloco]") {
  // The inner step moves each replica by -lr * g_r from the anchor; the
  // outer step moves the anchor by the replicas' mean of that: -lr * mean(g).
  const std::string sgd = "--steps 8 --optimizer sgd --lr 5e-2 --weight-decay 0.01 ";
  const Trained sync = train(1, sgd + "--strategy zero3", "sync");
  CHECK(sync.losses.back() < sync.losses.front());
  const std::string outer = " --outer-steps 1 --outer-lr 1 --outer-momentum 0";
  for (const auto& [np, layout] : std::vector<std::pair<int, std::string>>{
           {2, "--strategy hybrid --mesh 2,1"},
           {3, "--strategy hybrid --mesh 3,1"},
           {4, "--strategy hybrid --mesh 2,2"},
           {4, "--strategy hybrid_zero2 --mesh 2,2 --bucketing unit"}}) {
    INFO(layout);
    const Trained d = train(np, sgd + layout + outer, "h1");
    check_losses(sync, d);
    CHECK(relative_distance(sync.state, d.state) < 1e-5);
  }
}

TEST_CASE("DiLoCo with one replica, outer lr 1 and no momentum follows its replica, whatever H and optimizer",
          "[mpi][diloco]") {
  const std::string adamw = "--steps 8 --optimizer adamw --lr 3e-3 ";
  const Trained sync = train(2, adamw + "--strategy hybrid --mesh 1,2", "one-sync");
  const Trained d = train(2, adamw + "--strategy hybrid --mesh 1,2 --outer-steps 3 --outer-lr 1 --outer-momentum 0",
                          "one-diloco");
  check_losses(sync, d);
  CHECK(relative_distance(sync.state, d.state) < 1e-5);
}

TEST_CASE("DiLoCo's training does not depend on how each replica is sharded, and is not synchronous training",
          "[mpi][diloco]") {
  // Two replicas, an outer step every 3 steps with the paper's outer
  // optimizer, AdamW inside; 8 steps end inside the third round.
  const std::string flags = "--steps 8 --optimizer adamw --lr 3e-3 --outer-steps 3";
  const Trained base = train(2, flags + " --strategy hybrid --mesh 2,1", "layout-base");
  CHECK(base.losses.back() < base.losses.front());
  // Inside a replica: zero3, zero2, tensor parallelism, pipeline stages.
  for (const std::string layout :
       {"--strategy hybrid --mesh 2,2", "--strategy hybrid_zero2 --mesh 2,2 --bucketing unit",
        "--strategy hybrid --mesh 2,1 --tp 2", "--strategy hybrid --mesh 2,1 --pp 2 --grad-accum 2"}) {
    INFO(layout);
    const Trained d = train(4, flags + " " + layout, "layout");
    check_losses(base, d);
    CHECK(relative_distance(base.state, d.state) < 1e-5);
  }
  // Not vacuous: the replicas did train apart.
  const Trained sync = train(2, "--steps 8 --optimizer adamw --lr 3e-3 --strategy hybrid --mesh 2,1", "layout-sync");
  CHECK(relative_distance(sync.state, base.state) > 1e-3);
}

// --outer-dtype bf16: each replica's change (anchor - theta, a few inner
// steps' worth) is rounded to bf16, 2^-9 of itself, before it crosses; the
// sum is taken in f32. The weights move by far less than they weigh, so the
// rounding stays far below the weights' size, but it is there. int8 codes
// the change in blocks of 256 to within 1/254 of each block's largest
// value: coarser than bf16, and as far below the weights' size.
TEST_CASE("DiLoCo with a bf16 or int8 outer exchange trains as the f32 one does, to the rounding of the change",
          "[mpi][diloco]") {
  const std::string flags = "--steps 10 --optimizer adamw --lr 3e-3 --strategy hybrid --mesh 2,2 --outer-steps 3";
  const Trained f32 = train(4, flags, "dtype-f32");
  const Trained bf16 = train(4, flags + " --outer-dtype bf16", "dtype-bf16");
  const Trained int8 = train(4, flags + " --outer-dtype int8", "dtype-int8");
  for (const Trained* narrow : {&bf16, &int8}) {
    REQUIRE(narrow->losses.size() == f32.losses.size());
    for (size_t i = 0; i < f32.losses.size(); ++i) CHECK(narrow->losses[i] == Approx(f32.losses[i]).epsilon(1e-3));
  }
  const double d_bf16 = relative_distance(f32.state, bf16.state), d_int8 = relative_distance(f32.state, int8.state);
  CHECK(d_bf16 > 0);  // the exchange did round
  CHECK(d_bf16 < 1e-3);
  CHECK(d_int8 > d_bf16);  // int8's steps are coarser than bf16's
  CHECK(d_int8 < 1e-3);
}

TEST_CASE("a DiLoCo run resumed in the middle of an outer round continues bit for bit", "[mpi][diloco][checkpoint]") {
  const std::string flags = " --optimizer adamw --lr 3e-3 --strategy hybrid --mesh 2,2 --outer-steps 4";
  const Trained whole = train(4, "--steps 7" + flags, "resume-whole");
  const fs::path ck = scratch("diloco-ck");
  fs::remove_all(ck);
  // Step 5 is the second step of the second round: the replicas differ,
  // and the round's anchor and the outer momentum are in the checkpoint.
  train(4, "--steps 5 --checkpoint sharded --save '" + ck.string() + "'" + flags, "resume-first");
  const Trained resumed = train(4, "--steps 7 --resume '" + ck.string() + "'" + flags, "resume-rest");
  REQUIRE(resumed.losses.size() == 2);
  CHECK(resumed.losses[0] == whole.losses[5]);
  CHECK(resumed.losses[1] == whole.losses[6]);
  CHECK(resumed.state == whole.state);

  // Replicas that disagree cannot be read by another replica count, nor by
  // synchronous training in the middle of a round.
  const fsdpc::testing::Run other = fsdpc::testing::run_fsdpc_mpi(
      2, kCommon + "--steps 7 --resume '" + ck.string() + "' --optimizer adamw --strategy hybrid --mesh 1,2 --outer-steps 4",
      {.merge = true});
  CHECK(other.code == 2);
  CHECK_THAT(other.out, Contains("written by 2 DiLoCo replicas"));
  const fsdpc::testing::Run sync = fsdpc::testing::run_fsdpc_mpi(
      4, kCommon + "--steps 7 --resume '" + ck.string() + "' --optimizer adamw --strategy hybrid --mesh 2,2",
      {.merge = true});
  CHECK(sync.code == 2);
  CHECK_THAT(sync.out, Contains("inside a DiLoCo round of 4 steps"));
}

TEST_CASE("DiLoCo's flags are checked before training, naming the flag", "[diloco]") {
  struct Bad {
    const char* flags;
    const char* message;
  };
  for (const Bad& b : {Bad{"--strategy zero3 --outer-steps 5", "--strategy zero3 has no replicas"},
                       Bad{"--strategy hybrid --mesh 1,1 --outer-steps 5 --outer-momentum 1", "--outer-momentum must be in [0, 1)"},
                       Bad{"--strategy hybrid --mesh 1,1 --outer-steps 5 --outer-lr 0", "--outer-lr must be positive"},
                       Bad{"--strategy hybrid --mesh 1,1 --outer-steps -1", "--outer-steps"}}) {
    INFO(b.flags);
    const fsdpc::testing::Run r = fsdpc::testing::run_fsdpc(kCommon + "--steps 1 " + b.flags, {.merge = true});
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Contains(b.message));
  }
}

TEST_CASE("fsdpc dump shows DiLoCo's outer trace, and the backward without the replicas' all_reduce", "[diloco]") {
  const fsdpc::testing::Run r = fsdpc::testing::run_fsdpc(
      "dump --model mlp --world-size 4 --strategy hybrid --mesh 2,2 --outer-steps 5 --stage backward,outer_step");
  REQUIRE(r.code == 0);
  const size_t outer = r.out.find("def outer(");
  REQUIRE(outer != std::string::npos);
  const std::string backward = r.out.substr(0, outer), step = r.out.substr(outer);
  CHECK_THAT(backward, Contains("reduce_scatter(") && Contains("group=shard"));
  CHECK(backward.find("group=replicate") == std::string::npos);
  // Two parameters: each averaged over the replicas, then Nesterov's update.
  CHECK_THAT(step, Contains("anchor_t_0_weight") && Contains("momentum_t_2_weight"));
  size_t reduces = 0;
  for (size_t at = step.find("all_reduce("); at != std::string::npos; at = step.find("all_reduce(", at + 1)) ++reduces;
  CHECK(reduces == 2);
  CHECK_THAT(step, Contains("group=replicate, size=2, op=sum") && Contains("div(") && Contains("0.9") &&
                       Contains("0.7"));
  // bf16 on the link: each change cast, flattened and gathered, summed in f32.
  const fsdpc::testing::Run bf16 = fsdpc::testing::run_fsdpc(
      "dump --model mlp --world-size 4 --strategy hybrid --mesh 2,2 --outer-steps 5 --outer-dtype bf16 --stage "
      "outer_step");
  REQUIRE(bf16.code == 0);
  CHECK_THAT(bf16.out, Contains("convert_element_type(") && Contains("bf16[4096]") &&
                           Contains("all_gather(") && Contains("sum("));
  CHECK(bf16.out.find("all_reduce(") == std::string::npos);
  // int8: each change quantized as one row (2048 codes, 8 scales of 4
  // bytes), gathered, dequantized and summed in f32.
  const fsdpc::testing::Run int8 = fsdpc::testing::run_fsdpc(
      "dump --model mlp --world-size 4 --strategy hybrid --mesh 2,2 --outer-steps 5 --outer-dtype int8 --stage "
      "outer_step");
  REQUIRE(int8.code == 0);
  CHECK_THAT(int8.out, Contains("quantize(") && Contains("i8[1, 2080]") && Contains("i8[2, 2080]") &&
                           Contains("dequantize(") && Contains("sum("));
  CHECK(int8.out.find("all_reduce(") == std::string::npos);
  // Synchronous hybrid all-reduces each gradient over replicate instead.
  const fsdpc::testing::Run sync =
      fsdpc::testing::run_fsdpc("dump --model mlp --world-size 4 --strategy hybrid --mesh 2,2 --stage backward");
  REQUIRE(sync.code == 0);
  CHECK_THAT(sync.out, Contains("group=replicate"));
}
