// The memory plan (runtime/planner/memory_plan.h) against the allocator's
// measurement: every record of `mpirun -np N fsdpc train --log-json` carries
// both, and they must agree to the byte, per category and in total, for
// every strategy on 1..4 ranks, both models, with and without fusion (which
// must lower gpt2-tiny's peak) and gradient accumulation, every --remat
// mode and bf16; a --mem-cap below the plan's peak is refused before training, the
// peak itself is a cap that trains, and a cap that --remat none exceeds
// trains under --remat block.
#include <catch2/catch.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "frontend/jit.h"
#include "frontend/models/registry.h"
#include "runtime/planner/memory_plan.h"
#include "test/run_cli.h"
#include "test/scratch.h"

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

using fsdpc::testing::scratch;

struct Run {
  int exit_code = -1;
  std::string output;
  std::vector<Json> records;
};

// `mpirun -np N fsdpc train FLAGS --log-json ...`, its output and records.
Run train(int np, const std::string& flags) {
  const fs::path log = scratch("log.jsonl");
  fs::remove(log);
  const fsdpc::testing::Run run =
      fsdpc::testing::run_fsdpc_mpi(np, "train " + flags + " --log-json '" + log.string() + "'", {.merge = true});
  Run r;
  r.exit_code = run.code;
  r.output = run.out;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) r.records.push_back(Json::parse(line));
  return r;
}

// `fsdpc dump FLAGS --memory --format json`.
Json dump_memory(const std::string& flags) {
  const fs::path out = scratch("plan.json");
  const fsdpc::testing::Run r =
      fsdpc::testing::run_fsdpc("dump " + flags + " --memory --format json -o '" + out.string() + "'", {.merge = true});
  INFO("fsdpc dump " << flags << " --memory --format json\n" << r.out);
  REQUIRE(r.code == 0);
  std::ifstream in(out);
  return Json::parse(in);
}

// Every record's prediction equals its measurement, category by category.
// `resumed_at`: the step a --resume continues from (records start there).
void check_predicted_equals_measured(int np, const std::string& flags, int steps = 3, int resumed_at = 0) {
  const Run r = train(np, flags + " --steps " + std::to_string(steps));
  INFO("mpirun -np " << np << " fsdpc train " << flags << "\n" << r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(static_cast<int>(r.records.size()) == steps - resumed_at);
  for (const Json& rec : r.records) {
    INFO("step " << rec["step"] << ": measured " << rec["peak_bytes"].dump() << ", predicted "
                 << rec["predicted_peak_bytes"].dump());
    CHECK(rec["predicted_peak_bytes"] == rec["peak_bytes"]);
    CHECK(rec["peak_bytes"]["activations"].get<int64_t>() > 0);  // a step ran and was measured
    if (rec.contains("predicted_reserved_bytes")) CHECK(rec["predicted_reserved_bytes"] == rec["reserved_bytes"]);
  }
  // The plan's own line, printed beside the measurement at the first step.
  CHECK_THAT(r.output, Catch::Contains("predicted by the plan"));
}

// One strategy on 1..4 ranks; each world size varies model, fusion and
// accumulation so that every strategy meets each of them.
void check_strategy(const std::string& strategy) {
  const bool hybrid = strategy.rfind("hybrid", 0) == 0;
  const char* meshes[] = {"1,1", "1,2", "3,1", "2,2"};
  for (int np = 1; np <= 4; ++np) {
    std::string flags = "--strategy " + strategy;
    if (hybrid) flags += std::string(" --mesh ") + meshes[np - 1];
    switch (np) {
      case 1: flags += " --model gpt2-tiny --seq 32 --fusion none"; break;
      case 2: flags += " --model gpt2-tiny --seq 32 --fusion auto --grad-accum 2"; break;
      case 3: flags += " --model mlp --batch 24 --fusion auto --optimizer sgd --momentum 0.9"; break;
      case 4: flags += " --model mlp --batch 24 --grad-accum 2 --no-sync --clip 1.0 --fusion none"; break;
    }
    check_predicted_equals_measured(np, flags);
  }
}

}  // namespace

TEST_CASE("memory plan equals the measured peak: zero3 on 1..4 ranks", "[mpi][memory_plan]") { check_strategy("zero3"); }
TEST_CASE("memory plan equals the measured peak: zero2 on 1..4 ranks", "[mpi][memory_plan]") { check_strategy("zero2"); }
TEST_CASE("memory plan equals the measured peak: no_shard on 1..4 ranks", "[mpi][memory_plan]") {
  check_strategy("no_shard");
}
TEST_CASE("memory plan equals the measured peak: hybrid on 1..4 ranks", "[mpi][memory_plan]") { check_strategy("hybrid"); }
TEST_CASE("memory plan equals the measured peak: hybrid_zero2 on 1..4 ranks", "[mpi][memory_plan]") {
  check_strategy("hybrid_zero2");
}

TEST_CASE("memory plan equals the measured peak under --precision bf16 (zero3, zero2, hybrid)", "[mpi][memory_plan]") {
  // bf16 gathers, casts and products: 2-byte tensors beside the f32 shards.
  check_predicted_equals_measured(2, "--precision bf16 --strategy zero3 --model gpt2-tiny --seq 32 --grad-accum 2");
  check_predicted_equals_measured(2, "--precision bf16 --strategy zero2 --model gpt2-tiny --seq 32 --fusion none");
  check_predicted_equals_measured(4, "--precision bf16 --strategy hybrid --mesh 2,2 --model gpt2-tiny --seq 32 --no-sync "
                                     "--grad-accum 2 --reduce-dtype bf16");
}

TEST_CASE("memory plan: the other halves of each axis (gpt2 no_sync fused, mlp unfused, evaluation, bucketing)",
          "[mpi][memory_plan]") {
  const fs::path val = scratch("val.txt");  // read as bytes
  {
    std::ofstream f(val, std::ios::binary);
    for (int i = 0; i < 8192; ++i) f.put(static_cast<char>(i * 7 % 251));
  }
  check_predicted_equals_measured(2, "--model gpt2-tiny --seq 32 --batch 8 --grad-accum 4 --no-sync --fusion auto");
  check_predicted_equals_measured(3, "--model mlp --batch 24 --strategy zero2 --grad-accum 2 --fusion none");
  check_predicted_equals_measured(2, "--model gpt2-tiny --seq 32 --val-data '" + val.string() +
                                         "' --eval-every 1 --eval-batches 2 --bucketing unit --strategy zero3");
  check_predicted_equals_measured(4, "--model gpt2-tiny --seq 32 --strategy no_shard --bucket-mb 0.1 --fusion auto");
}

// --keep-gathered holds the whole parameters from the step's gather to its
// reduce, and the summed local gradients until the reduce: the plan replays
// both step-level traces around the micro-batches.
TEST_CASE("memory plan equals the measured peak with --keep-gathered (zero3, zero2)", "[mpi][memory_plan]") {
  check_predicted_equals_measured(2, "--model gpt2-tiny --seq 32 --batch 12 --grad-accum 3 --keep-gathered");
  check_predicted_equals_measured(
      3, "--model gpt2-tiny --seq 32 --batch 18 --strategy zero2 --grad-accum 3 --keep-gathered --fusion none");
  const Json plan = dump_memory("--model gpt2-tiny --seq 32 --batch 6 --world-size 2 --grad-accum 3 --keep-gathered");
  std::vector<std::string> phases;
  for (const Json& p : plan["steady"]["phases"]) phases.push_back(p["name"].get<std::string>());
  CHECK(std::find(phases.begin(), phases.end(), "gather") != phases.end());
  CHECK(std::find(phases.begin(), phases.end(), "reduce") != phases.end());
  CHECK(std::find(phases.begin(), phases.end(), "forward 3/3 gathered") != phases.end());
}

// DiLoCo: the anchors and outer momenta are made at the first step's start;
// a round's last step runs the outer trace after the update. With H = 1 every
// step does; with H = 2 the steps alternate, each predicted as what it is.
TEST_CASE("memory plan equals the measured peak under DiLoCo (--outer-steps 1 and 2)", "[mpi][memory_plan][diloco]") {
  check_predicted_equals_measured(4, "--model gpt2-tiny --seq 32 --strategy hybrid --mesh 2,2 --outer-steps 1");
  check_predicted_equals_measured(2, "--model mlp --batch 24 --strategy hybrid_zero2 --mesh 2,1 --outer-steps 2 "
                                     "--optimizer sgd --outer-momentum 0 --fusion none", 4);
  const Json plan = dump_memory("--model gpt2-tiny --seq 32 --world-size 4 --strategy hybrid --mesh 2,2 --outer-steps 50");
  REQUIRE(plan.contains("outer"));
  std::vector<std::string> phases;
  for (const Json& p : plan["outer"]["phases"]) phases.push_back(p["name"].get<std::string>());
  CHECK(phases.back() == "outer step");
  CHECK(plan["first"]["phases"][1]["name"] == "outer round");
  // The anchor and the Nesterov buffer: two more parameter-sized buffers,
  // live through every step as optimizer state (AdamW's two besides).
  CHECK(plan["steady"]["start"]["optimizer_state"].get<int64_t>() ==
        4 * plan["steady"]["start"]["parameters"].get<int64_t>());
}

// Streaming DiLoCo: each step is predicted by its kind (which fragments
// issue, are in flight or land after it), past the steps the plan covers
// too (1..2H+TAU+1, then period H). The f32 exchange holds each fragment's
// delta and its future across the delay; the bf16 one its cast and gathered
// rows, and lands by a sum. H = 6 with two fragments leaves steps without
// any exchange between them, which the plan does not replay once their
// kind is known.
TEST_CASE("memory plan equals the measured peak under Streaming DiLoCo (fragments, a delay)",
          "[mpi][memory_plan][diloco][streaming]") {
  check_predicted_equals_measured(4, "--model gpt2-tiny --seq 32 --strategy hybrid --mesh 2,2 --outer-steps 3 "
                                     "--outer-fragments 3 --outer-delay 1", 10);
  check_predicted_equals_measured(2, "--model mlp --batch 24 --strategy hybrid_zero2 --mesh 2,1 --wrap size:1 "
                                     "--outer-steps 6 --outer-fragments 2 --outer-delay 1 --outer-dtype bf16 "
                                     "--fusion none", 16);
  // The paper's H = 500 plans a handful of kinds, not a thousand steps.
  const Json plan = dump_memory("--model gpt2-tiny --seq 32 --world-size 4 --strategy hybrid --mesh 2,2 "
                                "--outer-steps 500 --outer-fragments 3 --outer-delay 5");
  REQUIRE(plan.contains("outer"));
  CHECK(plan["outer"]["start"]["communication"].get<int64_t>() > 0);  // an exchange in flight as it starts
}

TEST_CASE("memory plan: after --resume every step is a steady one", "[mpi][memory_plan]") {
  const fs::path save = scratch("ckpt");
  fs::remove_all(save);
  const Run first = train(2, "--model gpt2-tiny --seq 32 --steps 1 --save '" + save.string() + "'");
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  check_predicted_equals_measured(2, "--model gpt2-tiny --seq 32 --resume '" + save.string() + "'", 3, 1);
}

TEST_CASE("fsdpc dump --memory plans the step fsdpc train measures", "[mpi][memory_plan]") {
  // dump's --batch is per rank; train's is global.
  const Json plan = dump_memory("--model gpt2-tiny --seq 32 --batch 2 --world-size 2 --grad-accum 2");
  const Run r = train(2, "--model gpt2-tiny --seq 32 --batch 4 --grad-accum 2 --steps 2");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.records.size() == 2);
  CHECK(plan["first"]["peak_bytes"] == r.records[0]["peak_bytes"]);
  CHECK(plan["steady"]["peak_bytes"] == r.records[1]["peak_bytes"]);
  // The steady step holds the optimizer state throughout; the first makes it.
  CHECK(plan["steady"]["start"]["optimizer_state"].get<int64_t>() > 0);
  CHECK(plan["first"]["start"]["optimizer_state"].get<int64_t>() == 0);
  const Json& at = plan["steady"]["peak_at"];
  CHECK(at["live"]["total"] == plan["steady"]["peak_bytes"]["total"]);
  CHECK(at["statement"].get<int64_t>() > 0);  // a statement of a trace, named
}

// A region's intermediates are never allocated, so fusion must lower the
// measured peak where the peak holds them (gpt2-tiny's is in the backward,
// among layer_norm's, gelu's and softmax's VJP temporaries), and the plan
// `fsdpc dump --memory` prints must follow fusion byte for byte.
TEST_CASE("fusion lowers gpt2-tiny's measured peak, and dump --memory predicts it fused and unfused",
          "[mpi][memory_plan][fusion]") {
  int64_t peak[2] = {0, 0};
  for (int fused = 0; fused < 2; ++fused) {
    const std::string fusion = fused ? " --fusion auto" : " --fusion none";
    INFO(fusion);
    const Json plan = dump_memory("--model gpt2-tiny --seq 64 --batch 4 --world-size 2" + fusion);
    const Run r = train(2, "--model gpt2-tiny --seq 64 --batch 8 --steps 2" + fusion);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    REQUIRE(r.records.size() == 2);
    CHECK(plan["first"]["peak_bytes"] == r.records[0]["peak_bytes"]);
    CHECK(plan["steady"]["peak_bytes"] == r.records[1]["peak_bytes"]);
    peak[fused] = r.records[1]["peak_bytes"]["total"].get<int64_t>();
  }
  INFO("steady peak unfused " << peak[0] << " B, fused " << peak[1] << " B");
  CHECK(peak[1] < peak[0]);
  CHECK(peak[1] <= peak[0] * 0.95);  // measured: 3.55 MB against 4.17 MB, 15% lower
}

TEST_CASE("a --mem-cap below the plan's peak is refused on every rank before training; the peak itself trains",
          "[mpi][memory_plan]") {
  const Json plan = dump_memory("--model gpt2-tiny --seq 32 --batch 2 --world-size 3");
  const int64_t peak = std::max(plan["steady"]["peak_bytes"]["total"].get<int64_t>(),
                                plan["first"]["peak_bytes"]["total"].get<int64_t>());
  const std::string flags = "--model gpt2-tiny --seq 32 --steps 2 --mem-cap ";
  const Run refused = train(3, flags + std::to_string(peak - 1));
  INFO(refused.output);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output, Catch::Contains("predicted before running") &&
                                 Catch::Contains("(" + std::to_string(peak) + " B) per rank") &&
                                 Catch::Contains("live: parameters"));
  CHECK_THAT(refused.output, !Catch::Contains("step    0"));  // nothing trained
  CHECK(refused.records.empty());
  const Run fits = train(3, flags + std::to_string(peak));
  INFO(fits.output);
  CHECK(fits.exit_code == 0);
  REQUIRE(fits.records.size() == 2);
  CHECK(fits.records[1]["peak_bytes"]["total"].get<int64_t>() == peak);
}

TEST_CASE("plan_memory equals the allocator in process, step by step, peaks and reserved bytes", "[memory_plan]") {
  for (fsdpc::FusionMode fusion : {fsdpc::FusionMode::none, fsdpc::FusionMode::automatic})
    for (int k : {1, 2}) {
      INFO("fusion " << fsdpc::fusion_mode_name(fusion) << ", grad_accum " << k);
      fsdpc::JitOptions o;
      o.capture.batch = 2;
      o.capture.seq = 16;
      o.pipeline.mesh = fsdpc::flat_mesh(1);
      o.engine.fusion = fusion;
      o.engine.grad_accum = k;
      auto model = fsdpc::make_model("gpt2-tiny");
      auto compiled = fsdpc::jit(*model, o);
      const fsdpc::Stage& last = compiled->stages().back();
      fsdpc::EngineOptions e = o.engine;
      e.target = fsdpc::Target::cpu;
      const fsdpc::MemoryPlan plan = fsdpc::plan_memory({{last.traces.at(0), last.traces.at(1)}, {}, {}}, e);
      std::vector<int64_t> tokens(2 * 16, 5);
      const std::vector<fsdpc::HostTensor> batch = {fsdpc::HostTensor::ints({2, 16}, tokens),
                                                    fsdpc::HostTensor::ints({2, 16}, tokens)};
      for (size_t step = 0; step < 3; ++step) {
        INFO("step " << step);
        compiled->engine().reset_peak_memory();
        compiled->train_step(batch);
        const fsdpc::MemStats& m = compiled->engine().memory();
        const fsdpc::StepMemory& p = step == 0 ? plan.first : plan.steady;
        CHECK(m.total_peak == p.total_peak);
        for (size_t c = 0; c < fsdpc::kNumMemCategories; ++c) CHECK(m.peak[c] == p.peak[c]);
        CHECK(compiled->engine().reserved_memory() ==
              plan.reserved_after_step.at(std::min(step, plan.reserved_after_step.size() - 1)));
      }
      CHECK(plan.steady.total_peak > plan.first.total_peak);  // AdamW's moments through the whole step
      CHECK(plan.steady.peak_at().total == plan.steady.total_peak);
    }
}

// Rematerialisation (--remat) changes what is live, so the plan must follow
// it exactly; and it is what lets a model train under a cap it otherwise exceeds.
TEST_CASE("memory plan equals the measured peak under every --remat mode", "[mpi][memory_plan][remat]") {
  check_predicted_equals_measured(1, "--model gpt2-tiny --seq 32 --remat block");
  check_predicted_equals_measured(2, "--model gpt2-tiny --seq 32 --strategy zero2 --remat selective --grad-accum 2 "
                                     "--fusion auto");
  check_predicted_equals_measured(3, "--model gpt2-tiny --seq 32 --batch 6 --strategy no_shard --remat auto");
  check_predicted_equals_measured(4, "--model gpt2-tiny --seq 32 --strategy hybrid --mesh 2,2 --remat block "
                                     "--bucketing unit --fusion auto");
}

TEST_CASE("a --mem-cap that --remat none exceeds trains under --remat block, with the same losses",
          "[mpi][memory_plan][remat]") {
  // 64 tokens: gpt2-tiny's activations outweigh its parameter-sized buffers.
  auto peak_of = [&](const std::string& remat) {
    const Json plan = dump_memory("--model gpt2-tiny --seq 64 --batch 2 --world-size 2 --remat " + remat);
    return std::max(plan["steady"]["peak_bytes"]["total"].get<int64_t>(),
                    plan["first"]["peak_bytes"]["total"].get<int64_t>());
  };
  const int64_t none = peak_of("none"), block = peak_of("block");
  INFO("planned peaks: none " << none << " B, block " << block << " B");
  REQUIRE(block < none);
  const std::string cap = std::to_string((none + block) / 2);
  const std::string flags = "--model gpt2-tiny --seq 64 --batch 4 --steps 3 --mem-cap " + cap;
  const Run refused = train(2, flags + " --remat none");
  INFO(refused.output);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output, Catch::Contains("predicted before running") && Catch::Contains("--remat"));
  CHECK(refused.records.empty());
  const Run fits = train(2, flags + " --remat block");
  INFO(fits.output);
  REQUIRE(fits.exit_code == 0);
  REQUIRE(fits.records.size() == 3);
  for (const Json& rec : fits.records) CHECK(rec["peak_bytes"]["total"].get<int64_t>() <= std::stoll(cap));
  // Recomputing changes no number: the uncapped run without remat has the same losses.
  const Run plain = train(2, "--model gpt2-tiny --seq 64 --batch 4 --steps 3 --remat none");
  REQUIRE(plain.exit_code == 0);
  REQUIRE(plain.records.size() == 3);
  for (size_t s = 0; s < 3; ++s)
    CHECK(fits.records[s]["loss"].get<double>() == Approx(plain.records[s]["loss"].get<double>()).epsilon(1e-5));
}

TEST_CASE("training with every --remat mode gives the losses of --remat none to 1e-5 (AdamW, clipping, accumulation)",
          "[mpi][remat][train]") {
  const std::vector<std::pair<int, std::string>> runs = {
      {2, "--strategy zero3 --grad-accum 2"}, {2, "--strategy zero2"}, {3, "--strategy no_shard --batch 6"},
      {4, "--strategy hybrid --mesh 2,2 --grad-accum 2 --no-sync"}};
  for (const auto& [np, strategy] : runs) {
    const std::string flags = "--model gpt2-tiny --seq 16 --steps 6 --optimizer adamw --lr 3e-3 --clip 1.0 --seed 5 " +
                              strategy + " --remat ";
    const Run plain = train(np, flags + "none");
    INFO("np " << np << " " << strategy << "\n" << plain.output);
    REQUIRE(plain.exit_code == 0);
    REQUIRE(plain.records.size() == 6);
    for (const char* mode : {"block", "selective", "auto"}) {
      const Run r = train(np, flags + mode);
      INFO("--remat " << mode << "\n" << r.output);
      REQUIRE(r.exit_code == 0);
      REQUIRE(r.records.size() == 6);
      for (size_t s = 0; s < 6; ++s)
        CHECK(r.records[s]["loss"].get<double>() == Approx(plain.records[s]["loss"].get<double>()).epsilon(1e-5));
    }
  }
}

// A pipeline stage holds each micro-batch's saved values from its forward to
// its backward: all of them under GPipe, at most P - stage under 1F1B. The
// plan replays the stage's order (rank 0: stage 0), so it predicts both.
TEST_CASE("memory plan equals the measured peak of a pipeline stage under GPipe and 1F1B", "[mpi][memory_plan][pp]") {
  const std::string flags = "--model gpt2-tiny --seq 32 --batch 16 --pp 2 --grad-accum 4";
  check_predicted_equals_measured(2, flags + " --pp-schedule gpipe");
  check_predicted_equals_measured(2, flags + " --pp-schedule 1f1b");
  const Run gpipe = train(2, flags + " --pp-schedule gpipe --steps 2"), one = train(2, flags + " --steps 2");
  REQUIRE(gpipe.records.size() == 2);
  REQUIRE(one.records.size() == 2);
  CHECK(one.records[1]["peak_bytes"]["activations"].get<int64_t>() <
        gpipe.records[1]["peak_bytes"]["activations"].get<int64_t>());
  check_predicted_equals_measured(4, flags + " --no-sync --strategy zero3");
  check_predicted_equals_measured(4, flags + " --keep-gathered --strategy zero3 --pp-schedule gpipe");
  const Run refused = train(2, flags + " --steps 1 --mem-cap 1");
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output, Catch::Contains("pipeline stage 0: ") && Catch::Contains("predicted before running"));
  CHECK_THAT(refused.output, !Catch::Contains("step    0"));
}

// --gather-dtype int8: the quantized shard, its gathered codes and the
// dequantized parameter are values like any other; the plan counts them.
TEST_CASE("memory plan equals the measured peak with int8 gathers (zero3 bucketed, hybrid, bf16, DiLoCo int8)",
          "[mpi][memory_plan][int8]") {
  check_predicted_equals_measured(2, "--model gpt2-tiny --seq 32 --strategy zero3 --bucketing unit --gather-dtype int8");
  check_predicted_equals_measured(4, "--model gpt2-tiny --seq 32 --strategy hybrid --mesh 2,2 --gather-dtype int8 "
                                     "--precision bf16 --remat block");
  check_predicted_equals_measured(4, "--model gpt2-tiny --seq 32 --strategy hybrid --mesh 2,2 --outer-steps 1 "
                                     "--outer-dtype int8 --gather-dtype int8");
}

// The fused head's kernels take their [chunk, V] block (and, for bf16
// products, its bf16 copy) from the rank's allocator (Executor::scratch_bytes,
// executors/cpu/cpu_head.h), so the plan holds it, as a point of its own
// while the statement runs, and still equals the measurement: the whole
// vocabulary on one rank, a vocabulary slice under --tp 2 (with sequence
// parallelism, and Llama's untied head in bf16).
TEST_CASE("memory plan counts the fused head's kernel scratch on one rank and over tp 2", "[mpi][memory_plan][tp]") {
  check_predicted_equals_measured(1, "--model gpt2-tiny --seq 32 --loss-chunk 7");
  check_predicted_equals_measured(2, "--model gpt2-tiny --seq 32 --tp 2");
  check_predicted_equals_measured(2, "--model gpt2-tiny --seq 32 --tp 2 --sequence-parallel --loss-chunk 5");
  check_predicted_equals_measured(4, "--model llama-tiny --seq 32 --tp 2 --strategy zero3 --precision bf16");
  // 8 tokens x 64 per rank in one chunk: gpt2-tiny's 256 classes over 2 ranks,
  // one 8 x 128 f32 block (4 KiB) in the forward and in the backward.
  const Json plan = dump_memory("--model gpt2-tiny --seq 4 --batch 2 --world-size 2 --tp 2");
  int during = 0;
  for (const Json& phase : plan["steady"]["phases"])
    for (const Json& p : phase["points"]) {
      const std::string what = p["what"].get<std::string>();
      if (what.find("kernel scratch") == std::string::npos) continue;
      ++during;
      CHECK_THAT(what, Catch::Contains("linear_cross_entropy_stats") && Catch::Contains("4.0 KiB of kernel scratch"));
    }
  CHECK(during == 2);
}
