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

// Streaming DiLoCo (--outer-fragments, --outer-delay, --outer-mix): the
// outer step of one fragment of whole FSDP units at a time, at staggered
// steps, each exchange optionally in flight for a few inner steps.

TEST_CASE("Streaming DiLoCo with H = 1, outer lr 1, no momentum and SGD inside is synchronous training, per fragment",
          "[mpi][diloco][streaming]") {
  // With H = 1 every fragment meets after every step (its offset f * H / F
  // is 0), each over its own parameters: together, the averaged inner step.
  // gpt2-tiny's block wrap gives three units (root, h.0, h.1).
  const std::string sgd = "--steps 6 --optimizer sgd --lr 5e-2 --weight-decay 0.01 ";
  const Trained sync = train(1, sgd + "--strategy zero3", "s-sync");
  for (const auto& [np, layout] : std::vector<std::pair<int, std::string>>{
           {2, "--strategy hybrid --mesh 2,1 --outer-fragments 2"},
           {4, "--strategy hybrid_zero2 --mesh 2,2 --bucketing unit --outer-fragments 3"}}) {
    INFO(layout);
    const Trained d = train(np, sgd + layout + " --outer-steps 1 --outer-lr 1 --outer-momentum 0", "s-h1");
    check_losses(sync, d);
    CHECK(relative_distance(sync.state, d.state) < 1e-5);
  }
}

TEST_CASE("Streaming DiLoCo's training does not depend on how each replica is sharded, and differs from DiLoCo's",
          "[mpi][diloco][streaming]") {
  // H = 4, two fragments meeting after steps 4, 8 (fragment 0) and 2, 6
  // (fragment 1), each landing one step later and mixed half and half.
  const std::string flags = "--steps 9 --optimizer adamw --lr 3e-3 --outer-steps 4";
  const std::string streaming = flags + " --outer-fragments 2 --outer-delay 1";
  const Trained base = train(2, streaming + " --strategy hybrid --mesh 2,1", "s-layout-base");
  CHECK(base.losses.back() < base.losses.front());
  for (const std::string layout : {"--strategy hybrid --mesh 2,2", "--strategy hybrid_zero2 --mesh 2,2 --bucketing unit"}) {
    INFO(layout);
    const Trained d = train(4, streaming + " " + layout, "s-layout");
    check_losses(base, d);
    CHECK(relative_distance(base.state, d.state) < 1e-5);
  }
  // Not vacuous: fragments, the delay and the mix each change the training.
  const Trained whole = train(2, flags + " --strategy hybrid --mesh 2,1", "s-layout-whole");
  CHECK(relative_distance(whole.state, base.state) > 1e-4);
  const Trained no_delay = train(2, flags + " --outer-fragments 2 --strategy hybrid --mesh 2,1", "s-layout-nodelay");
  CHECK(relative_distance(no_delay.state, base.state) > 1e-4);
  CHECK(relative_distance(no_delay.state, whole.state) > 1e-4);
  const Trained anchor_only = train(2, streaming + " --outer-mix 0 --strategy hybrid --mesh 2,1", "s-layout-mix0");
  CHECK(relative_distance(anchor_only.state, base.state) > 1e-4);
  // The first two steps precede every exchange: the same for all.
  for (const Trained* t : {&whole, &no_delay, &anchor_only})
    for (size_t i = 0; i < 2; ++i) CHECK(t->losses[i] == base.losses[i]);
}

TEST_CASE("Streaming DiLoCo resumed with an exchange in flight continues bit for bit", "[mpi][diloco][streaming][checkpoint]") {
  // H = 4, F = 2, TAU = 2, bf16 on the link: fragment 0 issues after step 4
  // and lands after step 6; a checkpoint after step 5 lands it early (its
  // waits only) and keeps its means, the update still runs after step 6.
  const std::string flags = " --optimizer adamw --lr 3e-3 --strategy hybrid --mesh 2,2 --outer-steps 4 "
                            "--outer-fragments 2 --outer-delay 2 --outer-dtype bf16";
  const Trained whole = train(4, "--steps 8" + flags, "s-resume-whole");
  const fs::path ck = scratch("diloco-s-ck");
  fs::remove_all(ck);
  train(4, "--steps 5 --checkpoint sharded --save '" + ck.string() + "'" + flags, "s-resume-first");
  const Trained resumed = train(4, "--steps 8 --resume '" + ck.string() + "'" + flags, "s-resume-rest");
  REQUIRE(resumed.losses.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(resumed.losses[i] == whole.losses[5 + i]);
  CHECK(resumed.state == whole.state);
  // With an exchange in flight the checkpoint needs the same schedule.
  const fsdpc::testing::Run other = fsdpc::testing::run_fsdpc_mpi(
      4, kCommon + "--steps 8 --resume '" + ck.string() + "' --optimizer adamw --strategy hybrid --mesh 2,2 "
                   "--outer-steps 4 --outer-fragments 2 --outer-delay 1",
      {.merge = true});
  CHECK(other.code == 2);
  CHECK_THAT(other.out, Contains("with other Streaming DiLoCo settings"));
}

TEST_CASE("Streaming DiLoCo's flags are checked before training, saying what was expected", "[diloco][streaming]") {
  struct Bad {
    const char* flags;
    const char* message;
  };
  for (const Bad& b :
       {Bad{"--strategy hybrid --mesh 1,1 --outer-steps 4 --outer-fragments 0", "--outer-fragments must be at least 1"},
        Bad{"--strategy hybrid --mesh 1,1 --outer-steps 4 --outer-delay 4", "expected a delay below --outer-steps 4"},
        Bad{"--strategy hybrid --mesh 1,1 --outer-steps 4 --outer-delay -1", "--outer-delay must be at least 0"},
        Bad{"--strategy hybrid --mesh 1,1 --outer-steps 4 --outer-delay 1 --outer-mix 1", "--outer-mix must be in [0, 1)"},
        Bad{"--strategy hybrid --mesh 1,1 --outer-fragments 2", "add --outer-steps H"},
        Bad{"--strategy hybrid --mesh 1,1 --outer-steps 4 --outer-fragments 4",
            "--wrap block gives 3 units of parameters that train (expected at most 3 fragments"}}) {
    INFO(b.flags);
    const fsdpc::testing::Run r = fsdpc::testing::run_fsdpc(kCommon + "--steps 1 " + b.flags, {.merge = true});
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Contains(b.message));
  }
}

TEST_CASE("fsdpc dump shows each fragment's issue, land and update traces, a future crossing between them",
          "[diloco][streaming]") {
  const fsdpc::testing::Run r = fsdpc::testing::run_fsdpc(
      "dump --model gpt2-tiny --batch 2 --seq 16 --world-size 4 --strategy hybrid --mesh 2,2 --outer-steps 4 "
      "--outer-fragments 2 --outer-delay 1 --stage outer_step");
  REQUIRE(r.code == 0);
  for (const char* name : {"def outer_f0_issue(", "def outer_f0_land(", "def outer_f0_update(", "def outer_f1_issue(",
                           "def outer_f1_land(", "def outer_f1_update("})
    CHECK_THAT(r.out, Contains(name));
  const size_t issue = r.out.find("def outer_f1_issue("), land = r.out.find("def outer_f1_land("),
               update = r.out.find("def outer_f1_update(");
  const std::string issued = r.out.substr(issue, land - issue), landed = r.out.substr(land, update - land),
                    updated = r.out.substr(update);
  // The issue trace all-reduces and returns its futures unwaited; the land
  // trace takes them and waits; the update reads no collective.
  CHECK_THAT(issued, Contains("all_reduce(") && Contains("outer_ft"));
  CHECK(issued.find("wait(") == std::string::npos);
  CHECK_THAT(landed, Contains("wait(outer_ft"));
  CHECK(landed.find("all_reduce(") == std::string::npos);
  CHECK(updated.find("all_reduce(") == std::string::npos);
  CHECK(updated.find("wait(") == std::string::npos);
  // Fragment 1 (h.1) holds no parameter of fragment 0 (the root unit and h.0).
  CHECK(issued.find("t_h_1_attn_c_attn_weight") != std::string::npos);
  CHECK(issued.find("t_wte_weight") == std::string::npos);
  CHECK(issued.find("t_h_0_") == std::string::npos);
  // The merge: half the replica's own, half the new anchor.
  CHECK_THAT(updated, Contains("0.5"));
}
