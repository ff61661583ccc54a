// Memory per rank, measured by the runtime's allocator: persistent state
// (parameters, gradients, optimizer state) scales as 1/N within padding;
// when parameters dominate, zero3 < zero2 < no_shard at peak; and zero3's
// measured peak stays within 10% of what the traces' lifetimes predict.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "frontend/jit.h"
#include "frontend/models/registry.h"
#include "passes/stats.h"
#include "test/run_cli.h"
#include "test/scratch.h"

namespace fs = std::filesystem;
using namespace fsdpc;

namespace {

// The last step's log line of `mpirun -np N fsdpc train ...`.
nlohmann::json last_step(int np, const std::string& flags) {
  fs::path log = fsdpc::testing::scratch("log.jsonl");
  const std::string args = "train --model gpt2-tiny --steps 2 " + flags + " --log-json '" + log.string() + "'";
  const fsdpc::testing::Run r = fsdpc::testing::run_fsdpc_mpi(np, args, {.merge = true});
  INFO("mpirun -n " << np << " fsdpc " << args << "\n" << r.out);
  REQUIRE(r.code == 0);
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line)) last = line;
  return nlohmann::json::parse(last);
}

int64_t peak(const nlohmann::json& step, const char* category) { return step["peak_bytes"][category].get<int64_t>(); }

}  // namespace

TEST_CASE("persistent bytes per rank scale as 1/N", "[mpi][memory]") {
  const nlohmann::json one = last_step(1, "--strategy zero3");
  for (int n : {2, 4}) {
    const nlohmann::json s = last_step(n, "--strategy zero3 --batch 4");
    INFO("world " << n);
    for (const char* c : {"parameters", "gradients", "optimizer_state"}) {
      INFO(c);
      double ratio = static_cast<double>(peak(s, c)) * n / static_cast<double>(peak(one, c));
      CHECK(ratio >= 1.0);
      CHECK(ratio <= 1.04);  // padding: at most N-1 rows per parameter
    }
    CHECK(peak(s, "optimizer_state") == 2 * peak(s, "parameters"));  // AdamW: exp_avg, exp_avg_sq
  }
}

TEST_CASE("when parameters dominate, zero3 < zero2 < no_shard at peak", "[mpi][memory]") {
  const std::string small_batch = " --batch 2 --seq 4";
  int64_t z3 = last_step(2, "--strategy zero3" + small_batch)["peak_bytes"]["total"].get<int64_t>();
  int64_t z2 = last_step(2, "--strategy zero2" + small_batch)["peak_bytes"]["total"].get<int64_t>();
  int64_t ddp = last_step(2, "--strategy no_shard" + small_batch)["peak_bytes"]["total"].get<int64_t>();
  INFO("zero3 " << z3 << ", zero2 " << z2 << ", no_shard " << ddp);
  CHECK(z3 < z2);
  CHECK(z2 < ddp);
}

TEST_CASE("zero3's measured peak stays within 10% of the traces' prediction", "[memory]") {
  JitOptions o;
  o.capture.batch = 2;
  o.capture.seq = 32;
  o.pipeline.mesh = flat_mesh(1);
  o.pipeline.bucketing = true;
  auto model = make_model("gpt2-tiny");
  auto compiled = jit(*model, o);
  std::vector<int64_t> tokens(2 * 32, 3);
  std::vector<HostTensor> batch = {HostTensor::ints({2, 32}, tokens), HostTensor::ints({2, 32}, tokens)};
  compiled->train_step(batch);  // allocates the optimizer state
  compiled->engine().reset_peak_memory();
  compiled->train_step(batch);
  const MemStats& m = compiled->engine().memory();

  // Persistent state lives through the whole step; the traces' own peaks
  // (from their del lifetimes) come on top. Parameters are arguments of the
  // forward; those the backward does not take stay live beside it.
  const Trace& fwd = compiled->engine().forward_trace();
  const Trace& bwd = compiled->engine().backward_trace();
  int64_t params = 0, bwd_params = 0;
  for (const Proxy& a : fwd.args)
    if (a.is_param()) params += numel(a.type.shape) * dtype_size(a.type.dtype);
  for (const Proxy& a : bwd.args)
    if (a.is_param()) bwd_params += numel(a.type.shape) * dtype_size(a.type.dtype);
  const int64_t opt = m.live[static_cast<size_t>(MemCategory::optimizer_state)];
  const int64_t predicted =
      opt + std::max(trace_stats(fwd).peak_live_bytes, trace_stats(bwd).peak_live_bytes + params - bwd_params);
  INFO("measured " << m.total_peak << ", predicted " << predicted);
  CHECK(m.total_peak <= predicted * 1.10);
  CHECK(m.total_peak > predicted / 2);  // the prediction is not vacuous
}

TEST_CASE("a cap too small fails on every rank with the allocator's message and exit code 2", "[mpi][memory]") {
  const fsdpc::testing::Run r =
      fsdpc::testing::run_fsdpc_mpi(2, "train --model gpt2-tiny --steps 2 --mem-cap 300K", {.merge = true});
  const std::string& text = r.out;
  INFO(text);
  CHECK(r.code == 2);
  CHECK_THAT(text, Catch::Contains("out of memory on cpu") && Catch::Contains("300.0 KiB cap") &&
                       Catch::Contains("live: parameters"));
}
