// fsdpc train --profile: the file every rank's events go into parses as
// trace-event JSON, holds both ranks of a 2-rank gpt2-tiny run with their
// tracks (steps, kernels with FLOPs, collectives, waits, live memory), each
// collective lies inside its rank's step, the ranks' clocks agree, the
// breakdown is printed, and bad options exit 2 before anything runs.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "executors/comm/mpi_world.h"
#include "runtime/profiler.h"
#include "test/run_cli.h"
#include "test/scratch.h"

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

using fsdpc::testing::Run;
using fsdpc::testing::scratch_dir;

// `fsdpc <args>`, alone and under mpirun; its output and errors together.
Run run(const std::string& args) { return fsdpc::testing::run_fsdpc(args, {.merge = true}); }

Run train(int np, const std::string& flags) {
  return fsdpc::testing::run_fsdpc_mpi(np, "train " + flags, {.merge = true});
}

struct Span {
  double begin, end;
};

}  // namespace

TEST_CASE("train --profile writes one trace of both ranks with each collective inside its step", "[mpi][profile]") {
  const fs::path file = scratch_dir() / "trace.json";
  const Run r = train(2, "--model gpt2-tiny --steps 4 --profile '" + file.string() + "'");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("step breakdown"));
  CHECK_THAT(r.out, Catch::Contains("matmul"));
  CHECK_THAT(r.out, Catch::Contains("hidden"));
  // Written under a temporary name and renamed: nothing else is left behind.
  for (const fs::directory_entry& e : fs::directory_iterator(scratch_dir()))
    CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);

  std::ifstream in(file);
  REQUIRE(in);
  const Json trace = Json::parse(in);  // throws on anything but JSON
  REQUIRE(trace.contains("traceEvents"));
  const Json& events = trace["traceEvents"];
  REQUIRE(events.is_array());

  std::set<int> pids;
  std::map<int, std::map<std::string, Span>> steps;  // pid -> "step N" -> span
  std::map<int, std::vector<Span>> collectives;
  std::map<int, int> counters, matmuls, waits, compute;
  for (const Json& e : events) {
    REQUIRE(e.contains("ph"));
    REQUIRE(e.contains("pid"));
    const int pid = e["pid"].get<int>();
    pids.insert(pid);
    const std::string ph = e["ph"];
    if (ph == "C") {
      ++counters[pid];
      CHECK(e["args"].contains("activations"));
      CHECK(e["args"].contains("parameters"));
      continue;
    }
    if (ph != "X") continue;
    REQUIRE(e.contains("ts"));
    REQUIRE(e.contains("dur"));
    CHECK(e["dur"].get<double>() >= 0);
    const Span s{e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()};
    const std::string cat = e["cat"], name = e["name"];
    if (cat == "step" && name.rfind("step ", 0) == 0) steps[pid][name] = s;
    if (cat == "communication") {
      collectives[pid].push_back(s);
      CHECK(e["args"].contains("group"));
      CHECK(e["args"]["ranks"] == "0,1");
      CHECK(e["args"]["bytes"].get<double>() > 0);
    }
    if (cat == "matmul") {
      ++matmuls[pid];
      CHECK(e["args"]["flops"].get<double>() > 0);
    }
    if (cat == "compute") ++compute[pid];
    if (cat == "wait") ++waits[pid];
  }
  CHECK(pids == std::set<int>{0, 1});
  for (int pid : {0, 1}) {
    INFO("rank " << pid);
    // The default: the two steps after the first.
    REQUIRE(steps[pid].size() == 2);
    CHECK(steps[pid].count("step 1") == 1);
    CHECK(steps[pid].count("step 2") == 1);
    CHECK(counters[pid] > 0);
    CHECK(matmuls[pid] > 0);
    CHECK(compute[pid] > 0);
    CHECK(waits[pid] > 0);
    REQUIRE(!collectives[pid].empty());
    for (const Span& c : collectives[pid]) {
      bool inside = false;
      for (const auto& [name, s] : steps[pid]) inside |= c.begin >= s.begin - 1e-3 && c.end <= s.end + 1e-3;
      CHECK(inside);
    }
  }
  // Aligned clocks: the ranks' same step overlaps (its collectives join them).
  for (const char* name : {"step 1", "step 2"}) {
    const Span a = steps[0][name], b = steps[1][name];
    CHECK(a.begin < b.end);
    CHECK(b.begin < a.end);
  }
}

TEST_CASE("train --profile-steps picks the steps and bad values exit 2 before training", "[profile]") {
  const std::string base = "train --model gpt2-tiny --steps 4";
  const std::string file = (scratch_dir() / "bad.json").string();
  for (const char* bad : {"3:2", "x", "1:9", "2", "-1:2", "1:"}) {
    const Run r = run(base + " --profile '" + file + "' --profile-steps '" + bad + "'");
    INFO(bad << ": " << r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("--profile-steps"));
  }
  Run r = run(base + " --profile-steps 1:2");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("without --profile"));
  r = run(base + " --profile '" + (scratch_dir() / "no-such-folder" / "t.json").string() + "'");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("does not exist"));
  CHECK(!fs::exists(file));

  // One rank, step 0 only: a single step span, and the summary names it.
  const fs::path one = scratch_dir() / "one.json";
  r = run("train --model gpt2-tiny --steps 2 --profile '" + one.string() + "' --profile-steps 0:1");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("profile: step 0 of 1 rank written"));
  std::ifstream in(one);
  const Json trace = Json::parse(in);
  int step_spans = 0;
  for (const Json& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["cat"] == "step" && e["name"].get<std::string>().rfind("step ", 0) == 0) {
      ++step_spans;
      CHECK(e["name"] == "step 0");
    }
  CHECK(step_spans == 1);
}

TEST_CASE("profiler breakdown: the parts add up to the step and overlapping collectives count once", "[profile]") {
  using namespace fsdpc;
  mpi_init();  // a world of one without mpirun
  Profiler p(MPI_COMM_WORLD);
  const Profiler::Clock::time_point t0 = Profiler::Clock::now();
  auto at = [&](int ms) { return t0 + std::chrono::milliseconds(ms); };
  auto f32 = [](Shape shape) {
    TensorType t;
    t.shape = std::move(shape);
    return t;
  };
  auto statement = [&](OpId op, const char* x, const char* y, const char* out) {
    BoundSymbol b;
    b.op = op;
    b.inputs = {Operand::of(x), Operand::of(y)};
    Proxy o;
    o.name = out;
    o.type = f32({4, 16});
    b.outputs = {o};
    b.executor = "cpu";
    return b;
  };
  const TensorType a = f32({4, 8}), b = f32({8, 16}), c = f32({4, 16});
  const BoundSymbol mm = statement(OpId::Matmul, "a", "b", "c"), add = statement(OpId::Add, "c", "c", "d");
  const std::vector<TensorView> mm_in{{nullptr, &a}, {nullptr, &b}};
  const std::vector<TensorView> add_in{{nullptr, &c}, {nullptr, &c}};
  p.span(ProfileTrack::step, "step 1", at(0), at(100));
  p.span(ProfileTrack::step, "forward", at(0), at(50));
  p.kernel(mm, mm_in, at(0), at(40));     // matmul: 2*4*16*8 FLOPs
  p.kernel(add, add_in, at(40), at(50));  // other compute
  // Two all-reduces in flight together (blocking, so all exposed): 50..60 and 55..70.
  p.blocking_collective("all_reduce", "loss", "dp", MPI_COMM_WORLD, 8, at(50), at(60));
  p.blocking_collective("all_reduce", "clip", "dp", MPI_COMM_WORLD, 8, at(55), at(70));
  p.span(ProfileTrack::step, "optimizer", at(70), at(90));
  p.count_step();

  const StepBreakdown r = p.breakdown();
  CHECK(r.steps == 1);
  CHECK(r.step == Approx(0.100));
  CHECK(r.matmul == Approx(0.040));
  CHECK(r.other_compute == Approx(0.010));
  CHECK(r.exposed == Approx(0.025));
  CHECK(r.optimizer == Approx(0.020));
  CHECK(r.other == Approx(0.005));
  CHECK(r.in_flight == Approx(0.020));  // the union, not 0.025
  CHECK(r.hidden_share() == 0);         // exposed exceeds it: clamped

  const Json events = Json::parse("[" + p.events_json(0) + "]");
  std::set<int> comm_tids;
  bool matmul_seen = false;
  for (const Json& e : events) {
    if (e["ph"] != "X") continue;
    if (e["cat"] == "matmul") {
      matmul_seen = true;
      CHECK(e["name"] == "c = matmul");
      CHECK(e["args"]["flops"].get<double>() == 1024);
      CHECK(e["args"]["bytes"].get<double>() == (32 + 128 + 64) * 4);
      CHECK(e["dur"].get<double>() == Approx(40000));  // microseconds
    }
    if (e["cat"] == "communication") comm_tids.insert(e["tid"].get<int>());
  }
  CHECK(matmul_seen);
  CHECK(comm_tids.size() == 2);  // overlapping collectives of one group: two lanes
}
