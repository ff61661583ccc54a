// fsdpc advise --hardware local: the shipped profiles, and this host measured
// once and cached (launch overheads, region rates, the link between ranks
// under mpirun, each matmul shape the candidates run), the simulation
// charging what was measured, and the probes' own errors.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "test/advise_cli.h"
#include "test/golden.h"

using Catch::Contains;
using Json = nlohmann::json;
namespace fs = std::filesystem;
using fsdpc::testing::advise;
using fsdpc::testing::cached_two_rank_profile;
using fsdpc::testing::fsdpc_run;
using fsdpc::testing::Run;
using fsdpc::testing::scratch;

TEST_CASE("advise finds the shipped profiles and measures this host once") {
  const Json h100 = advise("--model gpt2-tiny --world-size 2 --hardware h100-sxm-nvlink-ib --executor cpu --precision f32");
  CHECK(h100["hardware"]["name"] == "h100-sxm-nvlink-ib");
  CHECK(h100["cap_bytes"].get<int64_t>() == 80000000000);
  // The two emulated nodes (tools/netns_cluster.sh): one rank per node, so
  // the flat dp group crosses the veth link.
  const Json netns = advise("--model gpt2-tiny --world-size 2 --hardware netns-veth");
  CHECK(netns["hardware"]["name"] == "netns-veth");
  CHECK(netns["hardware"]["gpus_per_node"].get<double>() == 1);
  for (const Json& c : netns["candidates"])
    for (const Json& st : c["comm"]) CHECK(st["inter_node"].get<bool>());
  const fs::path cache = scratch("cache");
  fs::remove_all(cache);
  const Run first = fsdpc_run("advise --model mlp --world-size 2 --hardware local");
  REQUIRE(first.code == 0);
  CHECK_THAT(first.err, Contains("measured"));
  const Run again = fsdpc_run("advise --model mlp --world-size 2 --hardware local");
  REQUIRE(again.code == 0);
  CHECK_THAT(again.err, Contains("read from " + (cache / "fsdpc").string()));
}

TEST_CASE("local measures the launch overheads and the region rates, and the simulation charges them") {
  fs::remove_all(scratch("cache"));
  const Json before = advise("--model gpt2-tiny --world-size 2 --hardware local");
  const fs::path file = cached_two_rank_profile();
  REQUIRE(!file.empty());
  Json profile = Json::parse(fsdpc::testing::read_file(file.string()));
  Json& c = profile["compute"];
  for (const char* key : {"kernel_overhead", "region_overhead", "matmul_overhead", "elementwise_rate", "row_region_rate"}) {
    INFO(key);
    CHECK(c[key]["value"].get<double>() > 0);
    CHECK(c[key]["source"].get<std::string>().rfind("measured", 0) == 0);
  }
  // A launch is microseconds, not the work of a statement.
  CHECK(c["kernel_overhead"]["value"].get<double>() < 1e-3);
  // Charged per launch: a millisecond more on each makes every step longer
  // by at least a millisecond per statement.
  for (const char* key : {"kernel_overhead", "region_overhead", "matmul_overhead"})
    c[key]["value"] = c[key]["value"].get<double>() + 1e-3;
  std::ofstream(file) << profile.dump(2);
  const Json after = advise("--model gpt2-tiny --world-size 2 --hardware local");
  REQUIRE(after["candidates"].size() == before["candidates"].size());
  for (size_t i = 0; i < before["candidates"].size(); ++i) {
    const Json& a = before["candidates"][i];
    const Json* b = nullptr;
    for (const Json& x : after["candidates"])
      if (x["candidate"] == a["candidate"]) b = &x;
    REQUIRE(b);
    CHECK((*b)["step_seconds"].get<double>() > a["step_seconds"].get<double>() + 0.1);  // gpt2-tiny: over 100 launches
  }
  // A cache from before the launches were measured (a guessed overhead) is measured again.
  c["kernel_overhead"] = Json{{"value", 10e-6}, {"source", "assumption: about 10 us per statement"}};
  std::ofstream(file) << profile.dump(2);
  const Run again = fsdpc_run("advise --model gpt2-tiny --world-size 2 --hardware local");
  REQUIRE(again.code == 0);
  CHECK_THAT(again.err, Contains("measuring again"));
  const Json remeasured = Json::parse(fsdpc::testing::read_file(file.string()));
  CHECK(remeasured["compute"]["kernel_overhead"]["source"].get<std::string>().rfind("measured", 0) == 0);
}

TEST_CASE("local measures the link between its ranks under mpirun, and the simulation charges each collective's host time") {
  fs::remove_all(scratch("cache"));
  const Json before = advise("--model gpt2-tiny --world-size 2 --hardware local");
  const fs::path file = cached_two_rank_profile();
  REQUIRE(!file.empty());
  Json profile = Json::parse(fsdpc::testing::read_file(file.string()));
  Json& link = profile["intra_node"];
  for (const char* key : {"latency", "bandwidth", "reduce_scatter_bandwidth", "all_reduce_bandwidth", "host_overhead"}) {
    INFO(key);
    CHECK(link[key]["value"].get<double>() > 0);
    CHECK_THAT(link[key]["source"].get<std::string>(), Contains("fsdpc link-probe"));
  }
  // Microseconds a collective on shared memory, not the milliseconds of a
  // probe gone wrong (a wait that blocked on a peer's compute).
  CHECK(link["host_overhead"]["value"].get<double>() < 1e-3);
  CHECK(link["latency"]["value"].get<double>() < 1e-3);
  // Every collective of a step pays it: a millisecond more on each makes
  // each step longer by its collectives' milliseconds, less the time compute
  // had sat blocked in waits (host time before a wait shortens the wait).
  link["host_overhead"]["value"] = link["host_overhead"]["value"].get<double>() + 1e-3;
  std::ofstream(file) << profile.dump(2);
  const Json after = advise("--model gpt2-tiny --world-size 2 --hardware local");
  REQUIRE(after["candidates"].size() == before["candidates"].size());
  for (const Json& a : before["candidates"]) {
    const Json* b = nullptr;
    for (const Json& x : after["candidates"])
      if (x["candidate"] == a["candidate"]) b = &x;
    REQUIRE(b);
    int64_t collectives = 0;
    for (const Json& st : a["comm"]) collectives += st["count"].get<int64_t>();
    INFO(a["candidate"] << ": " << collectives << " collectives");
    CHECK(collectives > 0);
    CHECK((*b)["comm_host_seconds"].get<double>() >= collectives * 1e-3);
    CHECK((*b)["step_seconds"].get<double>() >=
          a["step_seconds"].get<double>() + 0.999e-3 * collectives - a["exposed_comm_seconds"].get<double>());
    CHECK((*b)["step_seconds"].get<double>() > a["step_seconds"].get<double>() + 0.5e-3 * collectives);
  }
  // A profile of several ranks from before the link was measured is measured again.
  link.erase("host_overhead");
  std::ofstream(file) << profile.dump(2);
  const Run again = fsdpc_run("advise --model gpt2-tiny --world-size 2 --hardware local");
  REQUIRE(again.code == 0);
  CHECK_THAT(again.err, Contains("has no measured link between ranks; measuring again"));
  const Json remeasured = Json::parse(fsdpc::testing::read_file(file.string()));
  CHECK(remeasured["intra_node"]["host_overhead"]["value"].get<double>() > 0);
}

// The validation proper is bench/advise_validation.sh (within 20% on a
// quiet machine); a test on a CI machine holds a loose bound, and runs alone
// ([serial]): beside another test's ranks the steps measured 2.5-5x the
// prediction.
TEST_CASE("local predicts each measured step within 2x, and the peak exactly", "[mpi][serial]") {
  fs::remove_all(scratch("cache"));
  const std::string mpirun = std::string("FSDPC_MPIRUN='") + FSDPC_MPIEXEC + "'";
  // About a second of steps a candidate in three interleaved rounds (the
  // default): one round of 8 steps once measured a candidate at 2.7x its
  // prediction, the others within 17%.
  const Run r = fsdpc_run("advise --model gpt2-tiny --world-size 2 --hardware local --strategies zero3,no_shard "
                          "--measure --format json",
                          mpirun);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const Json j = Json::parse(r.out);
  REQUIRE(j["candidates"].size() == 7);
  for (const Json& c : j["candidates"]) {
    INFO(c.dump());
    const Json& m = c["measured"];
    REQUIRE_FALSE(m.contains("error"));
    CHECK(m["peak_bytes"].get<int64_t>() == c["peak_bytes"].get<int64_t>());
#if defined(__SANITIZE_ADDRESS__)
    // Instrumented, the runtime's host work runs several times slower than
    // the kernels (oneDNN is not instrumented): no bound on time.
#else
    CHECK(m["predicted_over_measured"].get<double>() > 0.5);
    CHECK(m["predicted_over_measured"].get<double>() < 2.0);
#endif
  }
}

TEST_CASE("matmul-probe names a file it cannot read or a line that is not a one-statement trace") {
  Run r = fsdpc_run("matmul-probe --traces " + scratch("none.jsonl").string());
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("matmul-probe: cannot read " + scratch("none.jsonl").string()));
  std::ofstream(scratch("bad.jsonl")) << "\n{\"not\": \"a trace\"}\n";
  r = fsdpc_run("matmul-probe --traces " + scratch("bad.jsonl").string());
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains(scratch("bad.jsonl").string() + ":2"));
}

TEST_CASE("link-probe needs an MPI world of two or more") {
  const Run alone = fsdpc_run("link-probe");
  CHECK(alone.code == 2);
  CHECK_THAT(alone.err, Contains("link-probe: needs at least 2 ranks, got 1 (run it as mpirun -np N fsdpc link-probe)"));
  CHECK(alone.out.empty());
}

TEST_CASE("local times each matmul shape the candidates run, once, and the simulation prices them by it") {
  fs::remove_all(scratch("cache"));
  const Run first = fsdpc_run("advise --model gpt2-tiny --world-size 2 --hardware local --format json");
  REQUIRE(first.code == 0);
  // Timed on both ranks at once, as a step runs them (a machine of one
  // core runs them one at a time, in this process).
  const bool together = std::thread::hardware_concurrency() > 1;
  CHECK_THAT(first.err, Contains(together ? "matmul shapes measured on every rank at once" : "matmul shapes measured"));
  const Json before = Json::parse(first.out);
  const fs::path file = cached_two_rank_profile();
  REQUIRE(!file.empty());
  Json profile = Json::parse(fsdpc::testing::read_file(file.string()));
  Json& shapes = profile["compute"]["matmul_shapes"];
  CHECK(shapes["source"].get<std::string>().rfind("measured", 0) == 0);
  if (together) CHECK_THAT(shapes["source"].get<std::string>(), Contains("fsdpc matmul-probe"));
  // gpt2-tiny's forward and backward: its projections' matmuls, attention,
  // the matmuls of their gradients (some reading a transpose in place), and
  // the head fused with its loss and its gradients (passes/fuse_head.h,
  // passes/head_grad_forward.h), which runs its products inside its own
  // kernel and is timed whole.
  std::set<std::string> ops;
  for (const auto& [key, seconds] : shapes["seconds"].items()) {
    ops.insert(key.substr(0, key.find_first_of(" |")));
    CHECK(seconds.get<double>() >= 0);
    CHECK(seconds.get<double>() < 0.1);  // a small model's matmul, not a stall
  }
  CHECK(shapes["seconds"].size() >= 5);
  CHECK(ops.count("matmul"));
  CHECK(ops.count("linear_cross_entropy_with_grad"));
  CHECK(ops.count("scaled_dot_product_attention"));
  // Cached: a second run measures none and gives the same table.
  const Run again = fsdpc_run("advise --model gpt2-tiny --world-size 2 --hardware local --format json");
  REQUIRE(again.code == 0);
  CHECK_THAT(again.err, !Contains("matmul shapes measured"));
  const Json same = Json::parse(again.out);
  for (size_t i = 0; i < before["candidates"].size(); ++i)
    CHECK(same["candidates"][i]["step_seconds"] == before["candidates"][i]["step_seconds"]);
  // Priced by the table: a millisecond more on each measured shape makes
  // every step longer by a millisecond per matmul a step runs (dozens).
  for (auto& [key, seconds] : shapes["seconds"].items()) seconds = seconds.get<double>() + 1e-3;
  std::ofstream(file) << profile.dump(2);
  const Json after = advise("--model gpt2-tiny --world-size 2 --hardware local");
  REQUIRE(after["candidates"].size() == before["candidates"].size());
  for (const Json& a : before["candidates"])
    for (const Json& b : after["candidates"])
      if (b["candidate"] == a["candidate"]) CHECK(b["step_seconds"].get<double>() > a["step_seconds"].get<double>() + 0.01);
}
