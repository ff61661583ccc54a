// fsdpc advise --measure: each candidate run under mpirun, its measured peak
// equal to the plan's and its step beside the prediction, a failing run in
// its row; and for DiLoCo, runs that meet every few steps, the measured step
// being the plain inner step plus a round's extra time spread over the
// candidate's H, as the prediction prices it (the arithmetic on logged
// steps made up here, then a real measurement).
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "runtime/planner/planner.h"
#include "test/advise_cli.h"

using Catch::Contains;
using fsdpc::DilocoOptions;
using fsdpc::Measurement;
using fsdpc::LoggedStep;
using fsdpc::testing::cpu_profile;
using fsdpc::testing::fsdpc_run;
using fsdpc::testing::Run;
using fsdpc::testing::scratch;
using Json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

DilocoOptions diloco(int h, int fragments = 1, int delay = 0) {
  DilocoOptions d;
  d.outer_steps = h;
  d.outer_fragments = fragments;
  d.outer_delay = delay;
  return d;
}

// Steps 1..n of `plain` ms, the two warm-up steps 900 ms, and the steps in
// `outer` taking `outer_ms` and flagged.
std::vector<LoggedStep> run(int n, double plain, const std::set<int>& outer, double outer_ms) {
  std::vector<LoggedStep> r;
  for (int k = 1; k <= n; ++k)
    r.push_back(k <= 2            ? LoggedStep{k, 900, false}
                : outer.count(k) ? LoggedStep{k, outer_ms, true}
                                 : LoggedStep{k, plain, false});
  return r;
}

}  // namespace

TEST_CASE("advise --measure runs each candidate under mpirun: measured peak equals predicted, time beside it",
          "[mpi]") {
  // Small steps, and zero3's four knob settings and no_shard only, so the
  // five runs take seconds.
  const std::string base = "--model gpt2-tiny --world-size 2 --batch 2 --seq 16 --hardware " + cpu_profile().string() +
                           " --measure";
  const std::string mpirun = std::string("FSDPC_MPIRUN='") + FSDPC_MPIEXEC + "'";
  const Run json = fsdpc_run("advise " + base + " --measure-steps 3 --strategies zero3,no_shard --format json", mpirun);
  INFO(json.err);
  REQUIRE(json.code == 0);
  const Json j = Json::parse(json.out);
  REQUIRE(j["candidates"].size() == 7);  // zero3's 6 and no_shard
  for (const Json& c : j["candidates"]) {
    INFO(c.dump());
    const Json& m = c["measured"];
    REQUIRE(m["ran"].get<bool>());
    REQUIRE_FALSE(m.contains("error"));
    CHECK(m["steps"] == 3);
    // The memory plan is exact on the cpu executor (memory_plan_test).
    CHECK(m["peak_bytes"].get<int64_t>() == c["peak_bytes"].get<int64_t>());
    CHECK(m["peak_matches"].get<bool>());
    const double ms = m["step_seconds"].get<double>();
    CHECK(std::isfinite(ms));
    CHECK(ms > 0);
    CHECK(m["predicted_over_measured"].get<double>() > 0);
    CHECK_THAT(json.err, Contains("/7: " + c["candidate"].get<std::string>() + ", 3 steps ..."));  // progress
  }
  // The text table: the measured columns, filled in the row. Without
  // --measure-steps a candidate runs about a second of steps by its
  // predicted step time (5 to 1000), in three rounds, each with two
  // warm-up steps more.
  const Run text = fsdpc_run("advise " + base + " --strategies no_shard", mpirun);
  REQUIRE(text.code == 0);
  CHECK_THAT(text.out, Contains("measured ms") && Contains("pred/meas") && Contains("measured peak"));
  const size_t row = text.out.find("\n  1  no_shard");
  REQUIRE(row != std::string::npos);
  const std::string line = text.out.substr(row + 1, text.out.find('\n', row + 1) - row - 1);
  CHECK(std::count(line.begin(), line.end(), 'B') == 3);  // peak, bytes sent, measured peak
  CHECK_THAT(text.out, Contains("measured here: 1 of 1 candidates ran") && Contains("plan's in 1 of 1"));
  double predicted = 0;
  for (const Json& c : j["candidates"])
    if (c["strategy"] == "no_shard") predicted = c["step_seconds"].get<double>();
  REQUIRE(predicted > 0);
  const int steps = static_cast<int>(std::clamp(1.0 + std::ceil(1.0 / predicted), 5.0, 1000.0));
  const int per_round = 2 + std::max(2, (steps + 2) / 3);
  for (int r = 1; r <= 3; ++r)
    CHECK_THAT(text.err, Contains("1/1 (round " + std::to_string(r) + "/3): no_shard, " + std::to_string(per_round) +
                                  " steps ..."));
  CHECK_THAT(text.out, Contains("fsdpc train, " + std::to_string(3 * per_round) + " steps; the median step"));
}

TEST_CASE("advise --measure: a failing run shows in its row; no mpirun is exit 2", "[mpi]") {
  const fs::path fake = scratch("fake-mpirun.sh");
  std::ofstream(fake) << "#!/bin/sh\necho 'mpirun: no slots' >&2\nexit 3\n";
  fs::permissions(fake, fs::perms::owner_all);
  const std::string base = "advise --model gpt2-tiny --world-size 2 --measure --strategies zero3,no_shard --hardware " +
                           cpu_profile().string();
  const Run r = fsdpc_run(base, "FSDPC_MPIRUN='" + fake.string() + "'");
  INFO(r.err);
  REQUIRE(r.code == 0);  // every row printed, each with its failure
  CHECK(r.out.find("run failed, exit 3: mpirun: no slots") != std::string::npos);
  size_t rows = 0;
  for (size_t at = 0; (at = r.out.find("run failed, exit 3", at)) != std::string::npos; ++at) ++rows;
  CHECK(rows == 7);
  const Run none = fsdpc_run(base, "FSDPC_MPIRUN= PATH=/nonexistent");
  CHECK(none.code == 2);
  CHECK_THAT(none.err, Contains("--measure runs each candidate under mpirun, and none was found"));
  CHECK(std::count(none.err.begin(), none.err.end(), '\n') == 1);
}

TEST_CASE("measure_round_steps: 2F(TAU + 1) steps a round, at least 4, at most H; none without DiLoCo") {
  CHECK(fsdpc::measure_round_steps(DilocoOptions{}) == 0);
  CHECK(fsdpc::measure_round_steps(diloco(500)) == 4);
  CHECK(fsdpc::measure_round_steps(diloco(50, 4, 2)) == 24);
  CHECK(fsdpc::measure_round_steps(diloco(50, 3, 0)) == 6);
  CHECK(fsdpc::measure_round_steps(diloco(10, 4, 2)) == 10);
  CHECK(fsdpc::measure_round_steps(diloco(3)) == 3);
}

TEST_CASE("summarise_runs: the median step after the warm-up without DiLoCo") {
  Measurement m;
  fsdpc::summarise_runs({run(7, 10, {}, 0), run(6, 12, {}, 0)}, DilocoOptions{}, m);
  CHECK(m.step_seconds == Approx(0.010));  // the median of five 10s and four 12s
  CHECK(m.round_steps == 0);
  CHECK(m.outer_seconds == 0);
}

TEST_CASE("summarise_runs: DiLoCo's step is the plain step plus whole rounds' extra time over H") {
  SECTION("one exchange a round of 4, two runs of two counted rounds") {
    // Rounds 5-8 and 9-12: three plain 100 ms steps and one of 160 ms, 60 ms
    // beyond 4 plain steps, a 50th of it a step at H = 50.
    Measurement m;
    const auto r = run(12, 100, {4, 8, 12}, 160);
    fsdpc::summarise_runs({r, r}, diloco(50), m);
    CHECK(m.round_steps == 4);
    CHECK(m.rounds == 4);
    CHECK(m.outer_seconds == Approx(0.060));
    CHECK(m.step_seconds == Approx(0.100 + 0.060 / 50));
  }
  SECTION("the first round is not counted: steps 1-4 hold the warm-up") {
    std::vector<LoggedStep> r = run(8, 100, {4, 8}, 140);
    r[2].ms = r[3].ms = 300;  // steps 3 and 4
    Measurement m;
    fsdpc::summarise_runs({r}, diloco(20), m);
    CHECK(m.rounds == 1);
    CHECK(m.outer_seconds == Approx(0.040));
    CHECK(m.step_seconds == Approx(0.100 + 0.040 / 20));
  }
  SECTION("streaming: steps in flight are slower, and count in the round's extra time") {
    // F = 2, TAU = 2: rounds of 12. Fragment 0 issues after steps 12, 24,
    // 36 (flagged, 130 ms), one step in flight (110 ms), its landing
    // (flagged, 120 ms); fragment 1 likewise after steps 6, 18, 30. A round:
    // 2 x (130 + 110 + 120) + 6 x 100 = 1320 ms, 120 beyond 12 plain steps.
    std::vector<LoggedStep> r;
    for (int k = 1; k <= 36; ++k) {
      const int at = k % 6;
      r.push_back(k <= 2     ? LoggedStep{k, 900, false}
                  : at == 0 ? LoggedStep{k, 130, true}
                  : at == 1 ? LoggedStep{k, 110, false}
                  : at == 2 ? LoggedStep{k, 120, true}
                            : LoggedStep{k, 100, false});
    }
    Measurement m;
    fsdpc::summarise_runs({r}, diloco(100, 2, 2), m);
    CHECK(m.round_steps == 12);
    CHECK(m.rounds == 2);  // 13-24 and 25-36
    CHECK(m.outer_seconds == Approx(0.120));
    CHECK(m.step_seconds == Approx(0.100 + 0.120 / 100));
  }
  SECTION("a run too short for a counted round gives the plain step, and says none was counted") {
    Measurement m;
    fsdpc::summarise_runs({run(7, 100, {4}, 400)}, diloco(50), m);
    CHECK(m.round_steps == 4);
    CHECK(m.rounds == 0);
    CHECK(m.outer_seconds == 0);
    CHECK(m.step_seconds == Approx(0.100));
  }
  SECTION("an exchange cheaper than the plain steps' spread costs nothing, not less") {
    std::vector<LoggedStep> r = run(8, 100, {4, 8}, 101);
    r[4].ms = 96;  // step 5: the round 5-8 took 397 ms, 3 below 4 plain steps
    Measurement m;
    fsdpc::summarise_runs({r}, diloco(50), m);
    CHECK(m.rounds == 1);
    CHECK(m.outer_seconds == 0);
    CHECK(m.step_seconds == Approx(0.100));
  }
}

namespace {

// advise --measure on gpt2-tiny's hybrid 2x1 mesh (replicas of one rank
// each) with DiLoCo rows, priced on the shipped netns-veth profile (nothing
// of this host measured first).
Run measure_diloco(const std::string& flags) {
  const Run r = fsdpc_run("advise --model gpt2-tiny --world-size 2 --mesh 2,1 --strategies hybrid --hardware "
                          "netns-veth --measure " + flags,
                          std::string("FSDPC_MPIRUN='") + FSDPC_MPIEXEC + "'");
  INFO(r.err);
  REQUIRE(r.code == 0);
  return r;
}

}  // namespace

TEST_CASE("advise --measure runs a DiLoCo candidate meeting every 4 steps and counts its exchanges", "[mpi]") {
  // 8 steps a run: rounds 1-4 (not counted) and 5-8.
  const Run r = measure_diloco("--outer-steps 50 --outer-dtype bf16 --measure-steps 8 --format json");
  CHECK_THAT(r.err, Contains("diloco:50:bf16, 8 steps, meeting every 4 ..."));
  const Json j = Json::parse(r.out);
  int diloco_rows = 0;
  for (const Json& c : j["candidates"]) {
    INFO(c.dump());
    const Json& m = c["measured"];
    REQUIRE_FALSE(m.contains("error"));
    CHECK(m["peak_bytes"].get<int64_t>() == c["peak_bytes"].get<int64_t>());
    if (!c.contains("diloco")) {
      CHECK_FALSE(m.contains("diloco"));
      continue;
    }
    ++diloco_rows;
    CHECK(m["steps"].get<int>() == 8);
    CHECK(m["diloco"]["round_steps"].get<int>() == 4);
    CHECK(m["diloco"]["rounds"].get<int>() == 1);
  }
  CHECK(diloco_rows > 0);
}

TEST_CASE("advise --measure names a DiLoCo row whose runs held no whole round", "[mpi]") {
  const Run r = measure_diloco("--outer-steps 50 --measure-steps 3");
  CHECK_THAT(r.out, Contains("met every 4 steps, but no run held a whole round after its first"));
}
