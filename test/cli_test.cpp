// The fsdpc command line, run as a user runs it: outputs, and the error
// paths (a one-line message and exit code 2, never a crash or a partial file).
#include <catch2/catch.hpp>
#ifdef FSDPC_HAVE_CUDA
#include "executors/cuda/device.h"
#endif
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "test/golden.h"
#include "test/run_cli.h"
#include "test/scratch.h"

using Catch::Contains;
namespace fs = std::filesystem;

namespace {
using fsdpc::testing::Run;
using fsdpc::testing::run_fsdpc;
using fsdpc::testing::scratch;
using fsdpc::testing::write_scratch;

std::string slurp(const fs::path& p) { return fsdpc::testing::read_file(p.string()); }

int count_lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

// A user's mistake: `fsdpc <args>` exits 2 with one line on stderr (under
// `max_chars`) containing `expect`, and nothing on stdout.
struct UsageError {
  std::string args, expect;
};

void check_usage_errors(const std::vector<UsageError>& cases, size_t max_chars = std::string::npos) {
  for (const UsageError& c : cases) {
    INFO("fsdpc " << c.args);
    Run r = run_fsdpc(c.args);
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Contains(c.expect));
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.size() < max_chars);
    CHECK(r.out.empty());
  }
}
}  // namespace

TEST_CASE("fsdpc trace --model mlp prints the tutorial trace", "[cli]") {
  Run r = run_fsdpc("trace --model mlp");
  REQUIRE(r.code == 0);
  CHECK(r.out == fsdpc::testing::read_file(fsdpc::testing::golden_path("mlp.trace")));
  CHECK(r.err.empty());
}

TEST_CASE("gpt2 JSON printed back reproduces the text form exactly", "[cli]") {
  Run text = run_fsdpc("trace --model gpt2");
  REQUIRE(text.code == 0);
  fs::path json = scratch("gpt2.json");
  REQUIRE(run_fsdpc("trace --model gpt2 --format json -o '" + json.string() + "'").code == 0);
  Run back = run_fsdpc("print '" + json.string() + "'");
  REQUIRE(back.code == 0);
  CHECK(back.out == text.out);
  Run piped = run_fsdpc("print -", {.stdin_file = json.string()});
  REQUIRE(piped.code == 0);
  CHECK(piped.out == text.out);
}

TEST_CASE("fsdpc print converts between text, JSON and dot", "[cli]") {
  fs::path golden = fsdpc::testing::golden_path("gpt2-tiny.trace");
  Run json = run_fsdpc("print '" + golden.string() + "' --format json");
  REQUIRE(json.code == 0);
  CHECK(json.out.rfind("{", 0) == 0);
  Run dot = run_fsdpc("print '" + golden.string() + "' --format dot");
  REQUIRE(dot.code == 0);
  CHECK(dot.out.rfind("digraph", 0) == 0);
  Run text = run_fsdpc("print '" + golden.string() + "'");
  CHECK(text.out == slurp(golden));
}

TEST_CASE("help is complete and exits 0", "[cli]") {
  Run r = run_fsdpc("--help");
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Contains("trace") && Contains("print") && Contains("models") && Contains("dump") &&
                        Contains("train") && Contains("passes"));
  Run train = run_fsdpc("train --help");
  CHECK(train.code == 0);
  CHECK_THAT(train.out, Contains("--strategy") && Contains("--mesh") && Contains("--steps") &&
                            Contains("--optimizer") && Contains("--lr") && Contains("--clip") &&
                            Contains("--grad-accum") && Contains("--no-sync") && Contains("--seed") &&
                            Contains("--log-json") && Contains("--mem-cap") && Contains("--batch"));
  Run dump = run_fsdpc("dump --help");
  CHECK(dump.code == 0);
  CHECK_THAT(dump.out, Contains("--world-size") && Contains("--stage") && Contains("--executor") &&
                           Contains("--stats") && Contains("--bucketing") && Contains("--prefetch"));
  Run t = run_fsdpc("trace --help");
  CHECK(t.code == 0);
  CHECK_THAT(t.out, Contains("--model") && Contains("--config") && Contains("--batch") &&
                        Contains("--seq") && Contains("--format") && Contains("--output"));
  Run m = run_fsdpc("models");
  CHECK(m.code == 0);
  CHECK_THAT(m.out, Contains("gpt2-xl") && Contains("mlp"));
}

TEST_CASE("user errors print one line and exit 2", "[cli]") {
  fs::path malformed = write_scratch("malformed.trace",
                                     "def computation(x):\n  # x: \"cpu f32[2]\"\n  t0 = neg(x\n  return t0\n");
  fs::path unknown_op = write_scratch("unknown-op.trace",
                                      "def computation(x):\n  # x: \"cpu f32[2]\"\n"
                                      "  t0 = frobnicate(x)  # t0: \"cpu f32[2]\"\n  return t0\n");
  fs::path shape_lie = write_scratch("shape-lie.trace",
                                     "def computation(x):\n  # x: \"cpu f32[2]\"\n"
                                     "  t0 = neg(x)  # t0: \"cpu f32[3]\"\n  return t0\n");
  fs::path bad_json = write_scratch("bad.json", "{\"name\": ");
  std::vector<UsageError> cases = {
      {"print /nonexistent/model.trace", "/nonexistent/model.trace: cannot open"},
      {"print '" + malformed.string() + "'", malformed.string() + ":3:"},
      {"print '" + unknown_op.string() + "'", "unknown op 'frobnicate'"},
      {"print '" + shape_lie.string() + "'", "invalid trace"},
      {"print '" + bad_json.string() + "'", bad_json.string()},
      {"print " + fs::temp_directory_path().string(), "is a directory"},
      {"trace --model nope", "unknown model 'nope'"},
      {"trace", "--model or --config"},
      {"trace --model mlp --format yaml", "yaml"},
      {"trace --model mlp --batch 0", "--batch"},
      {"trace --model mlp --batch x", "--batch"},
      {"trace --model mlp --config /etc/hostname", "excludes"},
      {"trace --model gpt2-tiny --seq 65", "outside [1, 64]"},
      {"trace --model mlp --seq 4", "no sequence dimension"},
      {"trace --model mlp --bogus", "--bogus"},
      {"dump --model mlp --stage nope", "unknown stage 'nope'"},
      {"dump --model mlp --strategy zero4", "zero4"},
      {"dump --model mlp --strategy zero3 --mesh 2,2", "--mesh applies to hybrid strategies"},
      {"dump --model mlp --strategy hybrid", "needs --mesh R,S"},
      {"dump --model mlp --strategy hybrid --mesh 2,x", "expected R,S"},
      {"dump --model mlp --strategy hybrid --mesh 2,2 --world-size 3", "has 4 ranks but --world-size is 3"},
      {"dump --model mlp --world-size 2 --rank 2", "--rank 2 is outside a world of 2"},
      {"dump --model mlp --wrap blocks", "blocks"},
      {"dump --model mlp --prefetch -1", "--prefetch"},
      {"dump --model mlp --max-inflight 0", "--max-inflight"},
      {"dump --model mlp --bucket-mb 0", "--bucket-mb"},
      {"dump --model mlp --stats --format dot", "--stats prints text or json"},
      {"dump --model mlp --trace x.trace", "excludes"},
      {"dump", "one of --model, --config or --trace"},
      {"dump --model mlp --stage exec --executor tpu", "--executor 'tpu'"},
      {"train --model gpt2-tiny --batch 3 --grad-accum 2", "does not split into 2"},
      {"train --model gpt2-tiny --optimizer adam", "adam"},
      {"train --model gpt2-tiny --mem-cap lots", "--mem-cap 'lots'"},
      {"train --model gpt2-tiny --strategy hybrid --mesh 2,2", "has 4 ranks but mpirun started 1"},
      {"train --model gpt2-tiny --reduce-dtype bf16", "--reduce-dtype bf16 needs --precision bf16"},
      {"train --model gpt2-tiny --precision fp8", "fp8"},
      {"train --model gpt2-tiny --executor tpu", "tpu"},
      {"train --model gpt2-tiny --strategy no_shard --grad-accum 2 --keep-gathered", "needs a sharded strategy"},
      {"train --model gpt2-tiny --grad-accum 2 --no-sync --keep-gathered", "drop --no-sync"},
      {"dump --model gpt2-tiny --keep-gathered --no-sync", "--no-sync and --accumulate select another step's"},
      {"frobnicate", "frobnicate"},
      {"", "subcommand"},
  };
  check_usage_errors(cases);
}

TEST_CASE("train with the cuda executor but no usable GPU prints one line and exits 2", "[cli]") {
#ifdef FSDPC_HAVE_CUDA
  if (fsdpc::cuda::query_devices().count > 0) return;  // a GPU machine trains instead (test/gpu)
  const std::string expect = "--executor cuda: no CUDA device is visible";
#else
  const std::string expect = "this build has no CUDA executor";
#endif
  Run r = run_fsdpc("train --model gpt2-tiny --steps 1 --executor cuda");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains(expect));
  CHECK(count_lines(r.err) == 1);
}

TEST_CASE("a failed write leaves no partial file", "[cli]") {
  Run r = run_fsdpc("trace --model mlp -o /nonexistent-dir/out.trace");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("/nonexistent-dir/out.trace"));
  CHECK(!fs::exists("/nonexistent-dir/out.trace"));

  fs::path target = write_scratch("keep.trace", "previous content\n");
  Run bad = run_fsdpc("trace --model nope -o '" + target.string() + "'");
  CHECK(bad.code == 2);
  CHECK(slurp(target) == "previous content\n");
  CHECK(!fs::exists(target.string() + ".tmp"));
}

TEST_CASE("fsdpc dump shows the sharded gradients and the zero3 re-gather", "[cli]") {
  // The done-means of the FSDP issue, read off the CLI.
  Run grad = run_fsdpc("dump --model mlp --world-size 2 --strategy zero2 --stage grad");
  REQUIRE(grad.code == 0);
  for (const char* w : {"t_0_weight", "t_2_weight"})
    CHECK_THAT(grad.out, Contains(std::string("all_gather(") + w + ", group=dp, size=2, dim=0)"));
  CHECK(count_lines(grad.out) > 10);
  size_t divs = 0, scatters = 0;
  for (size_t at = 0; (at = grad.out.find(", 2.0)", at)) != std::string::npos; ++at) ++divs;
  for (size_t at = 0; (at = grad.out.find("\"FUTURE cpu f32[32, 64]\" fully_sharded", at)) != std::string::npos; ++at)
    ++scatters;
  CHECK(divs == 2);
  CHECK(scatters == 2);

  Run bwd = run_fsdpc("dump --model mlp --world-size 2 --strategy zero3 --stage backward");
  REQUIRE(bwd.code == 0);
  CHECK_THAT(bwd.out, Contains("def backward(") && Contains("all_gather(t_2_weight, group=dp, size=2, dim=0)"));
  Run bwd2 = run_fsdpc("dump --model mlp --world-size 2 --strategy zero2 --stage backward");
  CHECK_THAT(bwd2.out, !Contains("all_gather"));

  Run stats = run_fsdpc("dump --model mlp --world-size 2 --stats --format json");
  REQUIRE(stats.code == 0);
  CHECK_THAT(stats.out, Contains("\"all_gather\"") && Contains("peak"));
  Run passes = run_fsdpc("passes");
  CHECK_THAT(passes.out, Contains("fsdp") && Contains("schedule") && Contains("del"));
}

TEST_CASE("fsdpc dump --keep-gathered shows the step's gather and reduce and micro-batches without collectives",
          "[cli]") {
  Run r = run_fsdpc("dump --model mlp --world-size 2 --strategy zero3 --keep-gathered --stage del,gather_once");
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("def gather(t_0_weight, t_2_weight)") && Contains("def reduce(grad_t_0_weight, grad_t_2_weight)"));
  CHECK_THAT(r.out, Contains("all_gather(t_0_weight, group=dp, size=2, dim=0)") &&
                        Contains("reduce_scatter(t0, group=dp, size=2, dim=0, op=sum)"));
  // The micro-batches (def forward/backward) read whole parameters and move nothing.
  const std::string micro = r.out.substr(0, r.out.find("def gather("));
  CHECK_THAT(micro, Contains("def forward(") && Contains("def backward(") && !Contains("all_gather") &&
                        !Contains("reduce_scatter") && !Contains("all_reduce"));
  Run exec = run_fsdpc("dump --model mlp --world-size 2 --strategy zero3 --keep-gathered --stage exec");
  REQUIRE(exec.code == 0);
  CHECK_THAT(exec.out, Contains("mpi_all_gather(") && Contains("mpi_reduce_scatter("));
}

TEST_CASE("train's AdamW, schedule and thread options: help, and bad values in one line with exit 2", "[cli]") {
  Run help = run_fsdpc("train --help");
  CHECK(help.code == 0);
  CHECK_THAT(help.out, Contains("--beta1") && Contains("--beta2") && Contains("--eps") && Contains("--lr-schedule") &&
                           Contains("--warmup-steps") && Contains("--min-lr") && Contains("--decay-steps") &&
                           Contains("lr*(it+1)/(W+1)"));
  const std::vector<UsageError> cases = {
      {"train --model gpt2-tiny --beta1 1", "--beta1: '1' is not a number in [0, 1)"},
      {"train --model gpt2-tiny --beta2 -0.5", "--beta2: '-0.5' is not a number in [0, 1)"},
      {"train --model gpt2-tiny --beta1 nan", "--beta1"},
      {"train --model gpt2-tiny --eps -1e-8", "--eps: '-1e-8' is not a number >= 0"},
      {"train --model gpt2-tiny --lr-schedule step", "step"},
      {"train --model gpt2-tiny --warmup-steps -1", "--warmup-steps"},
      {"train --model gpt2-tiny --min-lr 0.1 --lr 0.01", "--min-lr 0.1: must be in [0, --lr 0.01]"},
      {"train --model gpt2-tiny --lr-schedule cosine --steps 5 --warmup-steps 5", "must exceed --warmup-steps 5"},
      {"train --model gpt2-tiny --lr-schedule linear --decay-steps 0", "--decay-steps"},
      // Range errors say what is expected instead of printing DBL_MAX.
      {"train --model gpt2-tiny --steps 1e400", "--steps: '1e400' is not a whole number from 1 to 2147483647"},
      {"train --model gpt2-tiny --steps 0", "--steps: '0' is not a whole number"},
      {"train --model gpt2-tiny --lr -1", "--lr: '-1' is not a number > 0"},
      {"train --model gpt2-tiny --clip -1", "--clip: '-1' is not a number >= 0"},
      {"train --model gpt2-tiny --log-every 0", "--log-every"},
      {"trace --model mlp --batch 1e400", "--batch: '1e400' is not a whole number"},
      {"dump --model mlp --world-size 0", "--world-size: '0' is not a whole number"},
  };
  check_usage_errors(cases, 200);  // no 300-digit range
  setenv("FSDPC_CPU_THREADS", "lots", 1);
  Run bad_env = run_fsdpc("train --model gpt2-tiny --steps 1");
  unsetenv("FSDPC_CPU_THREADS");
  CHECK(bad_env.code == 2);
  CHECK_THAT(bad_env.err, Contains("FSDPC_CPU_THREADS='lots': expected a whole number of threads"));
  CHECK(count_lines(bad_env.err) == 1);
}

TEST_CASE("train logs lr, progress and ETA per step, and a summary at the end", "[cli]") {
  std::string text;
  for (int i = 0; i < 800; ++i) text += "shard the model, gather the rows, reduce the grads. ";
  const fs::path data = write_scratch("corpus.txt", text), log = scratch("progress.jsonl");
  Run r = run_fsdpc("train --model gpt2-tiny --seq 16 --batch 4 --steps 6 --lr 2e-3 --lr-schedule linear "
                    "--warmup-steps 2 --min-lr 2e-4 --beta1 0.8 --beta2 0.95 --eps 1e-6 --data '" + data.string() +
                    "' --val-data '" + data.string() + "' --eval-every 3 --eval-batches 1 --log-json '" +
                    log.string() + "'");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  // The header: the threads of the rank and the optimizer as configured.
  CHECK_THAT(r.out, Contains("train gpt2-tiny: 1 rank") && Contains(" per rank; oneDNN") &&
                        Contains("betas (0.8, 0.95), eps 1e-06") && Contains("schedule linear, warmup 2 steps"));
  CHECK_THAT(r.out, Contains("lr 2.000e-03") && Contains("6/6") && Contains("elapsed, eta"));
  CHECK_THAT(r.out, Contains("done: 6 steps in ") && Contains("tok/s, best val loss "));
  std::ifstream in(log);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  REQUIRE(lines.size() == 6);
  for (size_t it = 0; it < lines.size(); ++it) {
    CAPTURE(it, lines[it]);
    // The fields the existing readers use, then the new ones, each a number.
    for (const char* key : {"\"step\": ", "\"loss\": ", "\"grad_norm\": ", "\"step_ms\": ", "\"tokens_per_s\": ",
                            "\"peak_bytes\": {", "\"lr\": ", "\"steps_done\": ", "\"steps_total\": 6",
                            "\"elapsed_s\": ", "\"eta_s\": "})
      CHECK_THAT(lines[it], Contains(key));
    CHECK_THAT(lines[it], Contains("\"steps_done\": " + std::to_string(it + 1) + ","));
    const size_t at = lines[it].find("\"lr\": ") + 6;
    const double lr = std::stod(lines[it].substr(at));
    // nanoGPT's warmup, then a linear decay from step 2 to 6.
    const double want = it < 2 ? 2e-3 * static_cast<double>(it + 1) / 3.0
                               : 2e-4 + (1.0 - static_cast<double>(it - 2) / 4.0) * (2e-3 - 2e-4);
    CHECK(lr == Approx(want).epsilon(1e-8));
  }
  CHECK_THAT(lines[2], Contains("\"val_loss\": "));
  CHECK_THAT(lines[5], Contains("\"eta_s\": 0,") || Contains("\"eta_s\": 0}"));
}

TEST_CASE("train refuses a path it could not write before its first step, and writes nothing", "[cli]") {
  const fs::path file = write_scratch("paths-a-file", "kept\n");
  const fs::path folder = scratch("paths-a-folder");
  fs::create_directories(folder);
  // The flight recorder's folder: written for failures during a run, never
  // for a refused option, so it must not appear.
  const fs::path flight = scratch("paths-flight");
  const std::string train = "train --model gpt2-tiny --steps 1 --flight-dir '" + flight.string() + "' ";
  const std::vector<UsageError> cases = {
      // A file where the checkpoint folder goes: the run used to train to the
      // end, then abort (SIGABRT) with an uncaught filesystem_error.
      {train + "--save '" + file.string() + "'", "--save " + file.string() + ": is a file, not a folder"},
      {train + "--save '" + file.string() + "/sub'", file.string() + " is not a folder"},
      {train + "--log-json /nonexistent-dir/x.jsonl", "--log-json /nonexistent-dir/x.jsonl: the folder /nonexistent-dir does not exist"},
      {train + "--log-json '" + folder.string() + "'", "is a folder; expected a file name"},
      {train + "--save-state /nonexistent-dir/s.json", "--save-state /nonexistent-dir/s.json: the folder"},
      {train + "--profile /nonexistent-dir/p.json", "--profile /nonexistent-dir/p.json: the folder"},
      {"train --model gpt2-tiny --steps 1 --flight-dir '" + file.string() + "'",
       "--flight-dir " + file.string() + ": is a file, not a folder"},
  };
  check_usage_errors(cases);
  CHECK(slurp(file) == "kept\n");
  CHECK(!fs::exists(flight));
  CHECK(fs::is_empty(folder));
}
