// The FSDP promise, end to end: `mpirun -np N fsdpc train` gives the same
// per-step losses and final (gathered) weights as one process, for every
// strategy, with padding (N = 3), unit bucketing, gradient clipping and
// gradient accumulation (with and without no_sync), with tensor
// parallelism (--tp 2) alone and times zero3, zero2 and hybrid, and with
// pipeline parallelism (--pp 2) alone, times zero3/zero2 and times tp, on
// gpt2-tiny (and a padded vocabulary at --tp 2) over 10 steps. f32 sums run
// in a different order when sharded, so values agree to rounding: with SGD
// (momentum 0.9) every weight agrees to 1e-5 relative. AdamW divides each
// gradient by its own running RMS, which
// turns rounding noise in a gradient that is mathematically zero (the key
// bias of attention: softmax ignores a constant added to every score) into
// lr-sized steps whose sign depends on the summation order. For AdamW the
// losses agree to 1e-5; the gathered weights, as one vector, agree to 1e-5
// relative (||w_N - w_1|| / ||w_1||, the usual relative error of a vector;
// measured: 1e-6 to 4e-6); 99% of single weights agree to 1e-5 (99.5% on AVX-512), and the
// rest stay within the 2*lr*steps such a random walk can reach.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test/run_cli.h"
#include "test/scratch.h"

namespace fs = std::filesystem;

namespace {

struct Run {
  std::vector<double> losses;
  nlohmann::json state;
};

using fsdpc::testing::scratch;

Run train(int np, const std::string& flags, const std::string& tag, const std::string& optimizer,
          const std::string& model = "--model gpt2-tiny") {
  fs::path log = scratch(tag + ".jsonl"), state = scratch(tag + ".json");
  const std::string args = "train " + model +
                           " --seq 16 --batch 12 --steps 10 --clip 1.0 --weight-decay 0.01 --seed 5 " + optimizer +
                           " " + flags + " --log-json '" + log.string() + "' --save-state '" + state.string() + "'";
  const fsdpc::testing::Run cli = fsdpc::testing::run_fsdpc_mpi(np, args, {.merge = true});
  INFO("mpirun -n " << np << " fsdpc " << args << "\n" << cli.out);
  REQUIRE(cli.code == 0);
  Run r;
  std::ifstream l(log);
  for (std::string line; std::getline(l, line);) r.losses.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  std::ifstream s(state);
  r.state = nlohmann::json::parse(s);
  return r;
}

// `strict`: every weight to 1e-5 relative (of the tensor's largest
// magnitude); otherwise all but `loose` of them (a fraction), and all within
// `walk`. Always: the whole state, as one vector, to 1e-5 relative in the
// 2-norm.
void check_same(const Run& base, const Run& r, bool strict, double walk, double loose = 5e-3) {
  REQUIRE(r.losses.size() == base.losses.size());
  for (size_t i = 0; i < r.losses.size(); ++i) CHECK(r.losses[i] == Approx(base.losses[i]).epsilon(1e-5));
  REQUIRE(r.state.size() == base.state.size());
  size_t total = 0, off = 0;
  double norm2 = 0, diff2 = 0;
  for (auto it = base.state.begin(); it != base.state.end(); ++it) {
    const auto& want = it.value()["data"];
    const auto& got = r.state.at(it.key())["data"];
    REQUIRE(got.size() == want.size());
    double scale = 1e-12, worst = 0;
    for (size_t i = 0; i < want.size(); ++i) scale = std::max(scale, std::abs(want[i].get<double>()));
    for (size_t i = 0; i < want.size(); ++i) {
      double d = std::abs(got[i].get<double>() - want[i].get<double>());
      worst = std::max(worst, d);
      norm2 += want[i].get<double>() * want[i].get<double>();
      diff2 += d * d;
      off += d > 1e-5 * scale;
    }
    total += want.size();
    INFO(it.key());
    if (strict) CHECK(worst / scale < 1e-5);
    else CHECK(worst <= walk);
  }
  CHECK(static_cast<double>(off) <= loose * static_cast<double>(total));
  CHECK(std::sqrt(diff2 / norm2) < 1e-5);
}

struct Case {
  int np;
  std::string flags;
  // AdamW's share of weights allowed past 1e-5 (see check_same). Its update
  // is about lr * sign(g) where |g| is near zero (GPT-2's key biases have an
  // exactly zero gradient), so rounding noise in g becomes lr-sized steps.
  // Tensor parallelism adds noise to every gradient: each row-parallel
  // product, and the vocab-parallel LM head and cross-entropy, sum their
  // halves in another order. SGD, which does not amplify it, holds every
  // weight of these same runs to 1e-5. The share depends on the kernels'
  // summation order, so on the CPU: on the AVX-512 VM it stayed below 0.5%;
  // on the AVX2 VM of 2026-11-29 (oneDNN's gemm:jit avx2 kernels), the same
  // code put 0.72% past it at np 3 zero3 and 0.51% at np 2 tp 2, with the
  // losses and the whole vector still within 1e-5.
  double adamw_loose = 1e-2;
};

const std::vector<Case> kCases = {
    {2, "--strategy zero3"},
    {3, "--strategy zero3"},
    {4, "--strategy zero3"},
    {2, "--strategy zero2"},
    {3, "--strategy zero2 --bucketing unit"},
    {4, "--strategy zero3 --bucketing unit"},
    {2, "--strategy no_shard"},
    {4, "--strategy hybrid --mesh 2,2"},
    {4, "--strategy hybrid_zero2 --mesh 2,2 --bucketing unit"},
    {2, "--strategy zero3 --grad-accum 2"},
    {2, "--strategy zero3 --grad-accum 2 --no-sync"},
    {3, "--strategy zero2 --grad-accum 2 --no-sync --bucketing unit"},
    {2, "--strategy no_shard --grad-accum 3 --no-sync"},
    // Tensor parallelism (Megatron's column/row-parallel attention and MLP on
    // group tp), alone and times FSDP: --save-state puts the tp parts back
    // together, so the weights are compared whole.
    {2, "--strategy zero3 --tp 2"},
    {4, "--strategy zero3 --tp 2", 1e-2},
    {4, "--strategy zero2 --tp 2 --bucketing unit", 1e-2},
    {8, "--strategy hybrid --mesh 2,2 --tp 2", 1e-2},
    // Sequence parallelism (norms and residuals on S/T positions a rank).
    {4, "--strategy zero3 --tp 2 --sequence-parallel", 1e-2},
    // Pipeline parallelism: 2 stages of one block each, micro-batches in
    // 1F1B's and GPipe's order, alone and times FSDP on each stage's
    // data-parallel ranks, and times tp (8 ranks: 2 stages x 2 dp x 2 tp).
    // The tied wte is held by both stages, its gradient summed between them.
    {2, "--strategy zero3 --pp 2 --grad-accum 4"},
    {2, "--strategy no_shard --pp 2 --grad-accum 3 --pp-schedule gpipe"},
    {4, "--strategy zero3 --pp 2 --grad-accum 3"},
    {4, "--strategy zero2 --pp 2 --grad-accum 2 --bucketing unit --pp-schedule gpipe"},
    {4, "--strategy zero3 --pp 2 --grad-accum 3 --no-sync"},  // gradients reduced once, after the last micro-batch
    {8, "--strategy zero3 --pp 2 --tp 2 --grad-accum 3", 1e-2},
    // --keep-gathered: each parameter gathered once per step and each
    // gradient reduced once, after the last micro-batch (and under pp, after
    // the stage's last backward).
    {2, "--strategy zero3 --grad-accum 3 --keep-gathered"},
    {4, "--strategy hybrid_zero2 --mesh 2,2 --grad-accum 3 --keep-gathered"},
    {4, "--strategy zero3 --pp 2 --grad-accum 3 --keep-gathered"},
    {4, "--strategy zero3 --tp 2 --grad-accum 2 --keep-gathered", 1e-2},
};

}  // namespace

TEST_CASE("SGD training sharded over N processes matches one process to 1e-5", "[mpi][train]") {
  const std::string sgd = "--optimizer sgd --lr 3e-2 --momentum 0.9";
  const Run base = train(1, "--strategy zero3", "sgd-base", sgd);
  CHECK(base.losses.back() < base.losses.front());  // it learns
  for (const Case& c : kCases) {
    INFO("np " << c.np << " " << c.flags);
    check_same(base, train(c.np, c.flags, "sgd-np" + std::to_string(c.np), sgd), /*strict=*/true, 0);
  }
}

TEST_CASE("AdamW training sharded over N processes matches one process", "[mpi][train]") {
  const std::string adamw = "--optimizer adamw --lr 3e-3";
  const Run base = train(1, "--strategy zero3", "adamw-base", adamw);
  CHECK(base.losses.back() < base.losses.front());
  for (const Case& c : kCases) {
    INFO("np " << c.np << " " << c.flags);
    check_same(base, train(c.np, c.flags, "adamw-np" + std::to_string(c.np), adamw), /*strict=*/false,
               2 * 3e-3 * 10, c.adamw_loose);
  }
}

// A vocabulary tp does not divide (gpt2-tiny's shape with 257 tokens: 129
// rows per tp rank, the last one padding) trains as one process does, with
// and without sequence parallelism; --save-state drops the padding, so the
// weights are compared whole.
TEST_CASE("training a padded vocabulary over tp 2 x zero3 matches one process", "[mpi][train][tp]") {
  const fs::path config = scratch("odd-vocab.json");
  std::ofstream(config) << R"({"model_type": "gpt2", "n_layer": 2, "n_head": 2, "n_embd": 64, "vocab_size": 257,
                              "n_positions": 64})";
  const std::string model = "--config '" + config.string() + "'";
  const std::string sgd = "--optimizer sgd --lr 3e-2 --momentum 0.9";
  const Run base = train(1, "--strategy zero3", "vocab-base", sgd, model);
  CHECK(base.losses.back() < base.losses.front());
  REQUIRE(base.state.at("wte.weight")["data"].size() == 257 * 64);
  for (const char* flags : {"--strategy zero3 --tp 2", "--strategy zero3 --tp 2 --sequence-parallel"}) {
    INFO(flags);
    check_same(base, train(4, flags, "vocab-np4", sgd, model), /*strict=*/true, 0);
  }
  const std::string adamw = "--optimizer adamw --lr 3e-3";
  const Run adamw_base = train(1, "--strategy zero3", "vocab-adamw-base", adamw, model);
  check_same(adamw_base, train(4, "--strategy zero3 --tp 2", "vocab-adamw-np4", adamw, model), /*strict=*/false,
             2 * 3e-3 * 10, 1e-2);
}

// The fused head under tp (linear_cross_entropy_stats per vocabulary slice,
// passes/tensor_parallel_vocab.cpp) against the unfused vocabulary-parallel
// cross_entropy (--loss-chunk off) on the same ranks: the same losses to
// 1e-6 and weights to 1e-5, tied (GPT-2's wte) and untied (Llama's lm_head)
// heads, with sequence parallelism, and a padded vocabulary (257 over 2).
TEST_CASE("the fused head under --tp 2 trains as the unfused vocabulary-parallel head", "[mpi][train][tp]") {
  const fs::path config = scratch("fused-odd-vocab.json");
  std::ofstream(config) << R"({"model_type": "gpt2", "n_layer": 2, "n_head": 2, "n_embd": 64, "vocab_size": 257,
                              "n_positions": 64})";
  const std::string sgd = "--optimizer sgd --lr 3e-2 --momentum 0.9";
  const std::pair<std::string, std::string> runs[] = {
      {"--model gpt2-tiny", "--tp 2"},
      {"--model gpt2-tiny", "--tp 2 --sequence-parallel"},
      {"--model llama-tiny", "--tp 2"},
      {"--model llama-tiny", "--tp 2 --sequence-parallel"},
      {"--config '" + config.string() + "'", "--tp 2"},
  };
  for (const auto& [model, flags] : runs) {
    INFO(model << " " << flags);
    const Run unfused = train(2, flags + " --loss-chunk off", "tp-unfused", sgd, model);
    const Run fused = train(2, flags + " --loss-chunk 5", "tp-fused", sgd, model);
    CHECK(unfused.losses.back() < unfused.losses.front());
    REQUIRE(fused.losses.size() == unfused.losses.size());
    for (size_t i = 0; i < fused.losses.size(); ++i) CHECK(fused.losses[i] == Approx(unfused.losses[i]).epsilon(1e-6));
    check_same(unfused, fused, /*strict=*/true, 0);
  }
}
