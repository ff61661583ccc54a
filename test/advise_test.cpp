// fsdpc advise, run as a user runs it: the candidates it lists, their peak
// memory against fsdpc dump --memory and their bytes against dump --stats,
// the order of the rows, the cap, inter-node pricing, DiLoCo and int8 rows,
// and the errors. The local profile: advise_local_test; --measure:
// advise_measure_test.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <map>
#include <set>

#include "test/advise_cli.h"
#include "test/golden.h"

using Catch::Contains;
using Json = nlohmann::json;
namespace fs = std::filesystem;
using fsdpc::testing::advise;
using fsdpc::testing::candidate_row;
using fsdpc::testing::cpu_profile;
using fsdpc::testing::fsdpc_run;
using fsdpc::testing::Run;
using fsdpc::testing::scratch;

namespace {

std::set<std::string> expected_names(int world) {
  std::set<std::string> names{"no_shard"};
  auto fsdp = [&](const std::string& s) {
    for (const char* b : {" none", " unit"})
      for (const char* p : {" p1", " p2"}) names.insert(s + b + p);
    // Activation checkpointing rides on unit buckets, prefetch 1.
    for (const char* r : {" unit p1 remat:selective", " unit p1 remat:block"}) names.insert(s + r);
  };
  fsdp("zero3");
  fsdp("zero2");
  for (int r = 2; r < world; ++r)
    if (world % r == 0 && world / r > 1)
      for (const char* h : {"hybrid ", "hybrid_zero2 "}) fsdp(h + std::to_string(r) + "x" + std::to_string(world / r));
  return names;
}

// The memory plan's worst step, as fsdpc dump --memory prints it.
int64_t dump_peak(const std::string& args) {
  const fs::path out = scratch("plan.json");
  const Run r = fsdpc_run("dump " + args + " --memory --format json -o '" + out.string() + "'");
  INFO("fsdpc dump " << args << "\n" << r.err);
  REQUIRE(r.code == 0);
  std::ifstream in(out);
  const Json plan = Json::parse(in);
  auto worst = [](const Json& p) {
    int64_t most = std::max(p["steady"]["peak_bytes"]["total"].get<int64_t>(), p["first"]["peak_bytes"]["total"].get<int64_t>());
    if (p.contains("outer")) most = std::max(most, p["outer"]["peak_bytes"]["total"].get<int64_t>());  // DiLoCo
    return most;
  };
  if (!plan.contains("pipeline_stages")) return worst(plan);
  int64_t most = 0;  // with --pp, the fullest stage's
  for (const Json& stage : plan["pipeline_stages"]) most = std::max(most, worst(stage));
  return most;
}

// Bytes one rank sends in the execution traces, as fsdpc dump --stats counts them.
double dump_comm_bytes(const std::string& args) {
  const Run r = fsdpc_run("dump " + args + " --stage exec --stats --format json");
  REQUIRE(r.code == 0);
  double total = 0;
  for (const Json& t : Json::parse(r.out)) total += t["stats"]["collective_bytes"].get<double>();
  return total;
}


}  // namespace

TEST_CASE("advise prices bf16 on the cpu executor with the memory and bytes of dump --precision bf16") {
  const std::string profile = cpu_profile().string();
  const Json f32 = advise("--model gpt2-tiny --world-size 2 --hardware " + profile);
  const Json bf16 = advise("--model gpt2-tiny --world-size 2 --precision bf16 --hardware " + profile);
  REQUIRE(bf16["candidates"].size() == f32["candidates"].size());
  std::map<std::string, const Json*> f32_by_name;
  for (const Json& c : f32["candidates"]) f32_by_name[c["candidate"].get<std::string>()] = &c;
  for (const Json& c : bf16["candidates"]) {
    INFO(c["candidate"]);
    const std::string flags = "--model gpt2-tiny --world-size 2 --precision bf16 " + c["flags"].get<std::string>();
    CHECK(c["peak_bytes"].get<int64_t>() == dump_peak(flags));
    CHECK(c["comm_bytes"].get<double>() == Approx(dump_comm_bytes(flags)));
    const Json& same = *f32_by_name.at(c["candidate"].get<std::string>());
    if (c["strategy"].get<std::string>() == "no_shard")  // nothing gathered; gradients reduced in f32 either way
      CHECK(c["comm_bytes"].get<double>() == same["comm_bytes"].get<double>());
    else
      CHECK(c["comm_bytes"].get<double>() < same["comm_bytes"].get<double>());  // gathered in bf16
  }
}

TEST_CASE("advise lists every candidate, with the memory of dump --memory and the bytes of dump --stats") {
  const std::string profile = cpu_profile().string();
  // World 1: compile() elides the collectives over one rank, and so must advise.
  for (int world : {1, 2, 4}) {
    DYNAMIC_SECTION("world " << world) {
      const Json j = advise("--model gpt2-tiny --world-size " + std::to_string(world) + " --hardware " + profile);
      std::set<std::string> names;
      for (const Json& c : j["candidates"]) names.insert(c["candidate"].get<std::string>());
      CHECK(names == expected_names(world));
      CHECK(j["candidates"].size() == names.size());  // each once
      for (const Json& c : j["candidates"]) {
        const std::string flags = "--model gpt2-tiny --world-size " + std::to_string(world) + " " + c["flags"].get<std::string>();
        INFO(c["candidate"]);
        CHECK(c["peak_bytes"].get<int64_t>() == dump_peak(flags));
        CHECK(c["comm_bytes"].get<double>() == Approx(dump_comm_bytes(flags)));
        CHECK(c["step_seconds"].get<double>() > 0);
        CHECK(c["mfu"].get<double>() > 0);
        CHECK(c["mfu"].get<double>() < 1);
        // Hybrids send over both dimensions; the flat strategies over dp.
        std::set<std::string> groups;
        for (const Json& s : c["comm"]) groups.insert(s["group"].get<std::string>());
        const bool hybrid = c["strategy"].get<std::string>().rfind("hybrid", 0) == 0;
        if (world > 1)
          CHECK(groups == (hybrid ? std::set<std::string>{"shard", "replicate"} : std::set<std::string>{"dp"}));
      }
    }
  }
}

TEST_CASE("advise --tp compiles every strategy with tensor parallelism too, at the same global batch") {
  // gpt2-tiny's trace has 2 sequences per rank: a tp2 candidate's group of
  // two ranks trains 4, so 4 ranks train 8 either way.
  const Json j = advise("--model gpt2-tiny --world-size 4 --tp 1,2 --sequence-parallel --hardware " +
                        cpu_profile().string());
  std::set<std::string> names, expected = expected_names(4);
  for (const std::string& n : expected_names(2)) expected.insert({n + " tp2", n + " tp2 sp"});
  for (const Json& c : j["candidates"]) names.insert(c["candidate"].get<std::string>());
  CHECK(names == expected);
  const double tokens = j["tokens_per_rank"].get<double>() * 4;
  for (const Json& c : j["candidates"]) {
    INFO(c["candidate"]);
    const int tp = c["tp"].get<int>();
    CHECK(c["tokens_per_second"].get<double>() * c["step_seconds"].get<double>() == Approx(tokens));
    if (tp == 1) continue;
    CHECK(tp == 2);
    const std::string flags = "--model gpt2-tiny --world-size 4 --batch 4 " + c["flags"].get<std::string>();
    CHECK_THAT(flags, Contains("--tp 2"));
    CHECK(c["sequence_parallel"].get<bool>() == (flags.find("--sequence-parallel") != std::string::npos));
    CHECK(c["peak_bytes"].get<int64_t>() == dump_peak(flags));
    CHECK(c["comm_bytes"].get<double>() == Approx(dump_comm_bytes(flags)));
    std::set<std::string> groups;
    for (const Json& st : c["comm"]) groups.insert(st["group"].get<std::string>());
    CHECK(groups.count("tp"));
  }
}

TEST_CASE("advise --pp prices pipeline stages in 1F1B micro-batches, with and without --keep-gathered") {
  // gpt2-tiny's trace has 2 sequences per rank: a pp2 stage's data-parallel
  // rank trains 4 (the global batch is the same), in 4 micro-batches of one.
  const Json j = advise("--model gpt2-tiny --world-size 4 --pp 1,2 --hardware " + cpu_profile().string());
  std::set<std::string> names, expected = expected_names(4);
  expected.insert({"no_shard pp2 m4", "zero3 unit p1 pp2 m4", "zero2 unit p1 pp2 m4", "zero3 unit p1 pp2 m4 kg"});
  for (const Json& c : j["candidates"]) names.insert(c["candidate"].get<std::string>());
  CHECK(names == expected);
  const double tokens = j["tokens_per_rank"].get<double>() * 4;
  double plain = 0, kept = 0;
  for (const Json& c : j["candidates"]) {
    if (c["pp"].get<int>() == 1) continue;
    INFO(c["candidate"]);
    CHECK(c["micro_batches"].get<int>() == 4);
    CHECK(c["tokens_per_second"].get<double>() * c["step_seconds"].get<double>() == Approx(tokens));
    const std::string flags = "--model gpt2-tiny --world-size 4 --batch 4 " + c["flags"].get<std::string>();
    CHECK_THAT(flags, Contains("--pp 2 --grad-accum 4"));
    CHECK(c["peak_bytes"].get<int64_t>() == dump_peak(flags));
    std::map<std::string, double> sent;
    for (const Json& st : c["comm"]) sent[st["group"].get<std::string>()] = st["bytes"].get<double>();
    // Stage 1 sends 4 gradients of [1, 64, 64] f32 back; stage 0 the activations on.
    CHECK(sent["pp"] == 4 * 64 * 64 * 4);
    if (c["strategy"] != "no_shard") CHECK(sent["dp"] > 0);
    if (c["candidate"] == "zero3 unit p1 pp2 m4") plain = sent["dp"];
    if (c["candidate"] == "zero3 unit p1 pp2 m4 kg") kept = sent["dp"];
  }
  // Kept gathered, a stage moves its parameters once a step, not per micro-batch.
  CHECK(kept > 0);
  CHECK(kept < plain / 4);
}

TEST_CASE("advise puts the candidates that fit first, fastest first, and a cap excludes the larger ones") {
  const std::string base = "--model gpt2-tiny --world-size 4 --hardware " + cpu_profile().string();
  const Json all = advise(base);
  std::vector<int64_t> peaks;
  for (const Json& c : all["candidates"]) peaks.push_back(c["peak_bytes"].get<int64_t>());
  const auto [lo, hi] = std::minmax_element(peaks.begin(), peaks.end());
  REQUIRE(*lo < *hi);
  const int64_t cap = (*lo + *hi) / 2;
  const Json capped = advise(base + " --mem-cap " + std::to_string(cap));
  bool seen_misfit = false, some_fit = false, some_misfit = false;
  double last = 0;
  for (const Json& c : capped["candidates"]) {
    const bool fits = c["fits"].get<bool>();
    CHECK(fits == (c["peak_bytes"].get<int64_t>() <= cap));
    if (fits) {
      CHECK_FALSE(seen_misfit);  // every fitting row comes first
      CHECK(c["step_seconds"].get<double>() >= last);
      last = c["step_seconds"].get<double>();
    }
    seen_misfit = seen_misfit || !fits;
    some_fit = some_fit || fits;
    some_misfit = some_misfit || !fits;
  }
  CHECK(some_fit);
  CHECK(some_misfit);
  CHECK_THAT(capped["best"].get<std::string>(), Contains(capped["candidates"][0]["candidate"].get<std::string>()));
  // Below every peak nothing fits, and the line says so.
  const Json none = advise(base + " --mem-cap " + std::to_string(*lo - 1));
  for (const Json& c : none["candidates"]) CHECK_FALSE(c["fits"].get<bool>());
  CHECK_THAT(none["best"].get<std::string>(), Contains("nothing fits"));
  // The text table: a row per candidate, and the winner's flags.
  const Run text = fsdpc_run("advise " + base + " --mem-cap " + std::to_string(cap));
  REQUIRE(text.code == 0);
  CHECK_THAT(text.out, Contains("flags: " + capped["candidates"][0]["flags"].get<std::string>()));
  CHECK_THAT(text.out, Contains(" no "));
}

TEST_CASE("advise prices the dimension that crosses nodes on the inter-node link") {
  // Two ranks per node: on a 2x2 mesh the replicate pairs (0,2), (1,3) cross.
  const Json two = advise("--model gpt2-tiny --world-size 4 --mesh 2,2 --hardware " + cpu_profile().string());
  const Json four = advise("--model gpt2-tiny --world-size 4 --mesh 2,2 --hardware " + cpu_profile("four.json", 4).string());
  for (const Json& c : two["candidates"])
    for (const Json& s : c["comm"]) CHECK(s["inter_node"].get<bool>() == (s["group"] != "shard"));
  for (const Json& c : four["candidates"])
    for (const Json& s : c["comm"]) CHECK_FALSE(s["inter_node"].get<bool>());
  // The same bytes over a 10x slower link take longer.
  auto seconds = [](const Json& j, const std::string& name) {
    for (const Json& c : j["candidates"])
      if (c["candidate"] == name) return c["comm"][1]["seconds"].get<double>();
    FAIL("no candidate " << name);
    return 0.0;
  };
  CHECK(seconds(two, "hybrid 2x2 unit p1") > 5 * seconds(four, "hybrid 2x2 unit p1"));
}

// --outer-steps H: DiLoCo beside every synchronous hybrid with replicas; a
// round's outer step (its time and bytes) is spread over its H steps, and
// the slow-links line says from which link between nodes each keeps 90% of
// its speed.
TEST_CASE("advise --outer-steps prices DiLoCo beside synchronous hybrid, its outer step spread over H steps") {
  const std::string base = "--model gpt2-tiny --world-size 4 --mesh 2,2 --hardware " + cpu_profile().string();
  const Json j = advise(base + " --outer-steps 10 --outer-dtype bf16");
  std::set<std::string> names;
  for (const Json& c : j["candidates"]) names.insert(c["candidate"].get<std::string>());
  std::set<std::string> expected = expected_names(4);
  expected.insert({"hybrid 2x2 unit p1 diloco:10:bf16", "hybrid_zero2 2x2 unit p1 diloco:10:bf16"});
  CHECK(names == expected);
  auto row = [&](const std::string& name) { return candidate_row(j, name); };
  const Json sync = row("hybrid 2x2 unit p1"), diloco = row("hybrid 2x2 unit p1 diloco:10:bf16");
  const std::string flags = "--model gpt2-tiny --world-size 4 " + diloco["flags"].get<std::string>();
  CHECK_THAT(flags, Catch::Contains("--outer-steps 10") && Catch::Contains("--outer-dtype bf16"));
  // Memory: dump --memory's worst step, a round's last (the outer step's).
  CHECK(diloco["peak_bytes"].get<int64_t>() == dump_peak(flags));
  // Bytes: the inner step's, plus a tenth of the outer trace's.
  const Run outer = fsdpc_run("dump " + flags + " --stage outer_step --stats --format json");
  REQUIRE(outer.code == 0);
  const double outer_bytes = Json::parse(outer.out)[0]["stats"]["collective_bytes"].get<double>();
  CHECK(outer_bytes > 0);
  CHECK(diloco["comm_bytes"].get<double>() == Approx(dump_comm_bytes(flags) - outer_bytes + outer_bytes / 10));
  // Across the replicas: a tenth of one bf16 exchange of the parameters,
  // against every step's f32 all_reduce of the gradients.
  auto replicate_bytes = [](const Json& c) {
    for (const Json& st : c["comm"])
      if (st["group"] == "replicate") return st["bytes"].get<double>();
    return 0.0;
  };
  CHECK(replicate_bytes(diloco) == Approx(outer_bytes / 10));
  CHECK(replicate_bytes(diloco) < replicate_bytes(sync) / 10);
  CHECK(diloco["diloco"]["outer_seconds"].get<double>() > 0);
  // Fewer exchanges: DiLoCo keeps its speed on a slower link than synchronous training.
  const double sync_link = sync["link_for_90pct_bytes_per_second"].get<double>();
  const double diloco_link = diloco["link_for_90pct_bytes_per_second"].get<double>();
  CHECK(diloco_link > 0);
  CHECK(diloco_link < sync_link / 2);
  const Run text = fsdpc_run("advise " + base + " --outer-steps 10 --outer-dtype bf16");
  CHECK_THAT(text.out, Catch::Contains("slow links (this profile's: ") && Catch::Contains("keeps 90% of its speed down to"));
  // Without --outer-steps, no DiLoCo candidate: it changes the optimisation.
  const Json synchronous = advise(base);
  for (const Json& c : synchronous["candidates"]) CHECK(c["candidate"].get<std::string>().find("diloco") == std::string::npos);
}

// --gather-dtype int8: each sharded layout also with int8 gathers, priced
// from its own traces (the quantize and dequantize statements, a quarter of
// the gathers' bytes); where its gathers cross nodes it keeps its speed on
// a slower link than its twin gathering f32.
TEST_CASE("advise --gather-dtype int8 prices int8 gathers beside each sharded layout") {
  const std::string base = "--model gpt2-tiny --world-size 4 --mesh 2,2 --hardware " + cpu_profile().string();
  const Json j = advise(base + " --gather-dtype int8");
  std::set<std::string> names;
  for (const Json& c : j["candidates"]) names.insert(c["candidate"].get<std::string>());
  std::set<std::string> expected = expected_names(4);
  expected.insert({"zero3 unit p1 int8", "zero2 unit p1 int8", "hybrid 2x2 unit p1 int8", "hybrid_zero2 2x2 unit p1 int8"});
  CHECK(names == expected);
  auto row = [&](const std::string& name) { return candidate_row(j, name); };
  for (const char* layout : {"zero3 unit p1", "hybrid 2x2 unit p1"}) {
    INFO(layout);
    const Json exact = row(layout), int8 = row(std::string(layout) + " int8");
    const std::string flags = "--model gpt2-tiny --world-size 4 " + int8["flags"].get<std::string>();
    CHECK_THAT(flags, Catch::Contains("--gather-dtype int8"));
    CHECK(int8["gather_dtype"] == "int8");
    CHECK(int8["peak_bytes"].get<int64_t>() == dump_peak(flags));
    CHECK(int8["comm_bytes"].get<double>() == Approx(dump_comm_bytes(flags)));
    CHECK(int8["comm_bytes"].get<double>() < exact["comm_bytes"].get<double>());
    CHECK(int8["link_for_90pct_bytes_per_second"].get<double>() > 0);
  }
  // zero3 over both nodes gathers across the link: int8 keeps its speed on a
  // slower one. (hybrid 2x2 gathers within a node; only its replicas'
  // all_reduce crosses, which int8 leaves as it is.)
  CHECK(row("zero3 unit p1 int8")["link_for_90pct_bytes_per_second"].get<double>() <
        row("zero3 unit p1")["link_for_90pct_bytes_per_second"].get<double>());
  const Run text = fsdpc_run("advise " + base + " --gather-dtype int8");
  CHECK_THAT(text.out, Catch::Contains("slow links (this profile's: ") && Catch::Contains(" int8 down to "));
  // Without it, no int8 candidate: it changes what the forward computes with.
  const Json exact_only = advise(base);  // named: a range-for over a temporary's member would dangle
  for (const Json& c : exact_only["candidates"])
    CHECK(c["candidate"].get<std::string>().find("int8") == std::string::npos);
}

// Streaming DiLoCo: the same bytes a round as DiLoCo's, in F exchanges, each
// wait hidden behind up to TAU inner steps; the exchanges in flight raise
// the peak (dump --memory's worst kind of step). On this profile's fast
// link the waits are short, but as the link slows they grow and the delay
// hides them: the row keeps its speed down to a slower link than DiLoCo's.
TEST_CASE("advise prices Streaming DiLoCo: DiLoCo's bytes a round, its waits hidden behind TAU steps") {
  const std::string base = "--model gpt2-tiny --world-size 4 --mesh 2,2 --hardware " + cpu_profile().string() +
                           " --outer-steps 10 --outer-dtype bf16";
  const Json plain = advise(base), streaming = advise(base + " --outer-fragments 3 --outer-delay 2");
  const auto row = candidate_row;
  auto replicate_bytes = [](const Json& c) {
    for (const Json& st : c["comm"])
      if (st["group"] == "replicate") return st["bytes"].get<double>();
    return 0.0;
  };
  const Json d = row(plain, "hybrid 2x2 unit p1 diloco:10:bf16"),
             sd = row(streaming, "hybrid 2x2 unit p1 diloco:10:bf16:F3:tau2");
  const std::string flags = "--model gpt2-tiny --world-size 4 " + sd["flags"].get<std::string>();
  CHECK_THAT(flags, Catch::Contains("--outer-fragments 3") && Catch::Contains("--outer-delay 2"));
  CHECK(sd["peak_bytes"].get<int64_t>() == dump_peak(flags));
  CHECK(sd["peak_bytes"].get<int64_t>() > d["peak_bytes"].get<int64_t>());
  CHECK(replicate_bytes(sd) == Approx(replicate_bytes(d)));
  CHECK(sd["diloco"]["outer_fragments"] == 3);
  CHECK(sd["diloco"]["outer_seconds"].get<double>() <= d["diloco"]["outer_seconds"].get<double>() * (1 + 1e-9));
  CHECK(sd["link_for_90pct_bytes_per_second"].get<double>() < d["link_for_90pct_bytes_per_second"].get<double>() / 2);
}

TEST_CASE("advise is deterministic: one thread or several, the same table") {
  const std::string base = "--model gpt2-tiny --world-size 4 --hardware " + cpu_profile().string();
  Json one = advise(base + " --threads 1"), three = advise(base + " --threads 3");
  one.erase("seconds");
  three.erase("seconds");
  CHECK(one == three);
}

TEST_CASE("advise --mesh puts the hybrids on that mesh only") {
  const Json j = advise("--model gpt2-tiny --world-size 8 --mesh 2,4 --hardware " + cpu_profile().string());
  std::set<std::string> names;
  for (const Json& c : j["candidates"]) names.insert(c["candidate"].get<std::string>());
  std::set<std::string> expected = expected_names(8);
  std::erase_if(expected, [](const std::string& n) { return n.find("4x2") != std::string::npos; });
  CHECK(names == expected);
  CHECK(names.size() == 25);  // zero3, zero2, hybrid, hybrid_zero2: 4 knob settings + 2 remat modes each; no_shard
}

TEST_CASE("advise refuses bad input with one line and exit code 2") {
  const fs::path bad = scratch("bad.json");
  std::ofstream(bad) << fsdpc::testing::read_file(cpu_profile().string()).replace(
      fsdpc::testing::read_file(cpu_profile().string()).find("\"latency\""), 9, "\"latenzy\"");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--model gpt2-tiny --world-size 2 --hardware nope", "--hardware 'nope': no such profile"},
      {"--model gpt2-tiny --world-size 0", "--world-size"},
      {"--model gpt2-tiny --world-size 4 --mesh 3,2 --hardware " + cpu_profile().string(),
       "--mesh 3,2 has 6 ranks but --world-size is 4"},
      {"--model gpt2-tiny --world-size 2 --hardware " + bad.string(), bad.string() + ": intra_node.latency: missing"},
      {"--world-size 2", "one of --model or --config is required"},
      {"--model gpt2-tiny --world-size 2 --mem-cap 1X --hardware " + cpu_profile().string(), "unit must be B, K, M or G"},
      {"--model gpt2-tiny --world-size 2 --measure --measure-steps 0", "--measure-steps"},
      {"--model gpt2-tiny --world-size 2 --measure-steps 3", "--measure-steps requires --measure"},
      {"--model gpt2-tiny --world-size 2 --strategies zero4", "unknown strategy 'zero4'"},
      {"--model gpt2-tiny --world-size 2 --strategies hybrid", "none of them has a candidate at --world-size 2"},
      {"--model gpt2-tiny --world-size 4 --tp 3 --hardware " + cpu_profile().string(), "--tp 3 does not divide --world-size 4"},
      {"--model gpt2-tiny --world-size 4 --sequence-parallel --hardware " + cpu_profile().string(),
       "give --tp sizes above 1"},
      {"--model gpt2-tiny --world-size 4 --tp 4 --hardware " + cpu_profile().string(), "2 is not divisible by 4"},
      {"--model gpt2-tiny --world-size 4 --tp 2 --mesh 2,2 --hardware " + cpu_profile().string(),
       "--mesh 2,2 has 4 ranks but --world-size is 4 over --tp 2 (2 data-parallel ranks)"},
      {"--model gpt2-tiny --world-size 4 --pp 3 --hardware " + cpu_profile().string(),
       "--pp 3 does not divide the 4 data-parallel ranks"},
      {"--model gpt2-tiny --world-size 4 --pp 2 --micro-batches 3 --hardware " + cpu_profile().string(),
       "--micro-batches 3 does not divide the 4 rows"},
  };
  for (const auto& [args, expect] : cases) {
    const Run r = fsdpc_run("advise " + args);
    INFO("fsdpc advise " << args << "\nstderr: " << r.err);
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Contains(expect));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.out.empty());
  }
}
