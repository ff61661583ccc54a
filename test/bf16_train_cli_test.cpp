// bf16 mixed precision on the CPU, trained as users run it (`mpirun -n N
// fsdpc train --precision bf16`): one process's losses (to the bound below)
// on every strategy, mesh, tp and pp; really bf16 (its losses differ from f32's, by a few
// percent at most); accumulation with and without no_sync; resume bit-exact
// from the f32 master weights; and a core without AVX-512 (oneDNN capped to
// AVX2), where oneDNN has no bf16 kernel, still trains, its products widened
// to f32, which the header says.
// Its own file: a process that has initialised MPI cannot launch mpirun.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "test/run_cli.h"
#include "test/scratch.h"

namespace {

struct Trained {
  std::vector<double> losses;
  std::string output;
};

// `mpirun -n np fsdpc train` of gpt2-tiny with AdamW and clipping, and the
// per-step losses of its --log-json.
Trained train(int np, const std::string& flags, const std::string& env = "") {
  const std::filesystem::path log = fsdpc::testing::scratch("bf16.jsonl");
  std::filesystem::remove(log);
  const std::string args = "train --model gpt2-tiny --seq 16 --batch 24 --optimizer adamw --lr 3e-3 "
                           "--weight-decay 0.01 --clip 1.0 --seed 5 " + flags + " --log-json '" + log.string() + "'";
  const fsdpc::testing::Run r = fsdpc::testing::run_fsdpc_mpi(np, args, {.env = env, .merge = true});
  INFO(env << " mpirun -n " << np << " fsdpc " << args << "\n" << r.out);
  REQUIRE(r.code == 0);
  return Trained{fsdpc::testing::logged_losses(log.string()), r.out};
}

// The largest relative difference between two runs' losses, each step checked to `rtol`.
double compare(const std::vector<double>& got, const std::vector<double>& want, double rtol) {
  REQUIRE(got.size() == want.size());
  REQUIRE_FALSE(want.empty());
  double worst = 0;
  for (size_t s = 0; s < want.size(); ++s) {
    INFO("step " << s << ": " << got[s] << " against " << want[s]);
    CHECK(got[s] == Approx(want[s]).epsilon(rtol));
    worst = std::max(worst, std::abs(got[s] - want[s]) / std::abs(want[s]));
  }
  return worst;
}

}  // namespace

// N ranks against one process run with the same cast and fusion flags
// (no_shard and --keep-gathered cast replicated parameters at their uses,
// the sharded strategies before the gather; fused regions round fewer
// intermediates than unfused ops). The widen pass
// (passes/widen_accumulation.h) sums every gradient into f32, so ranks
// differ from one process only in f32's summation order, as in f32: the
// issue's command (2 ranks, zero3) stays within 1e-5 (5.4e-6 over 8 steps).
// Not every run does: a weight one f32 ulp apart can round to another bf16
// value when it is cast, and from then on the forward differs at bf16's
// precision; over 8 AdamW steps that reached 1.8e-5 (2 ranks,
// --keep-gathered), hence 3e-5. Three runs keep a bf16 rounding that depends on the
// ranks, each bounded by what was measured (2026-11-29, an AVX-512 BF16 VM)
// with a margin:
// - N = 3: each rank's cotangent is scaled by 1/(its tokens), a power of
//   two here, where one process's 1/(3·its tokens) is not; the bf16
//   gradients round differently from the first step on (6.0e-5);
// - --reduce-dtype bf16: the reduction itself rounds each partial sum (4.0e-5);
// - --tp 2 (its head unfused): each rank's row-parallel partial product is
//   rounded to bf16 before the all_reduce that sums them (1.7e-4).
struct RanksRun {
  int np;
  std::string flags, one_process_flags;
  double rtol;
};

TEST_CASE("bf16: every strategy, mesh, tp and pp trains one process's bf16 losses", "[bf16][mpi][train]") {
  const std::string common = "--precision bf16 --steps 8";
  const std::vector<RanksRun> runs = {
      // The command. Measured 0.7e-5 to 1.6e-5 over seeds 1-6 (and
      // 0.5e-5 to 1.9e-5 with attention's backward decomposed): where an f32
      // summation order moves a weight across a bf16 rounding boundary, its
      // cast moves by 2^-8, so the gap is a matter of which weights sit there.
      {2, "--strategy zero3", "", 3e-5},
      {4, "--strategy zero3 --fusion none", "--fusion none", 3e-5},
      {2, "--strategy no_shard", "--strategy no_shard", 3e-5},
      {4, "--strategy hybrid --mesh 2,2", "", 3e-5},
      {4, "--strategy hybrid_zero2 --mesh 2,2", "", 3e-5},
      {2, "--strategy zero3 --pp 2 --grad-accum 2", "--grad-accum 2", 3e-5},
      {2, "--strategy zero3 --keep-gathered --grad-accum 2", "--keep-gathered --grad-accum 2", 3e-5},
      {2, "--strategy zero3 --remat block", "--remat block", 3e-5},
      {3, "--strategy zero2", "", 2e-4},
      {2, "--strategy zero3 --reduce-dtype bf16", "", 2e-4},
      {2, "--strategy zero3 --tp 2", "", 5e-4},
  };
  std::map<std::string, Trained> one;
  for (const RanksRun& run : runs) {
    if (!one.count(run.one_process_flags)) {
      one[run.one_process_flags] = train(1, common + " " + run.one_process_flags);
      const Trained& o = one[run.one_process_flags];
      CHECK_THAT(o.output, Catch::Contains("bf16 matmuls"));
      CHECK(o.losses.back() < o.losses.front());  // it learns
    }
    const Trained t = train(run.np, common + " " + run.flags);
    INFO("np " << run.np << " " << run.flags << " against one process with '" << run.one_process_flags << "'");
    const double worst = compare(t.losses, one[run.one_process_flags].losses, run.rtol);
    std::printf("bf16 np %d %s: losses %.6f -> %.6f, at most %.2e from one process\n", run.np, run.flags.c_str(),
                t.losses.front(), t.losses.back(), worst);
  }
}

TEST_CASE("bf16: the losses differ from f32's, by a few percent at most over 50 steps", "[bf16][mpi][train]") {
  const Trained f32 = train(1, "--steps 50");
  const Trained bf16 = train(1, "--steps 50 --precision bf16");
  REQUIRE(bf16.losses.size() == f32.losses.size());
  double worst = 0;
  size_t differ = 0;
  for (size_t s = 0; s < f32.losses.size(); ++s) {
    const double rel = std::abs(bf16.losses[s] - f32.losses[s]) / f32.losses[s];
    worst = std::max(worst, rel);
    differ += rel > 1e-6;
  }
  std::printf("bf16 against f32 over 50 steps: %.4f -> %.4f against %.4f -> %.4f, at most %.2f%% apart\n",
              bf16.losses.front(), bf16.losses.back(), f32.losses.front(), f32.losses.back(), 100 * worst);
  CHECK(differ > 40);      // it really runs in bf16
  CHECK(worst < 0.05);     // and trains as f32 does
  CHECK(bf16.losses.back() < 0.8 * bf16.losses.front());
}

TEST_CASE("bf16: gradient accumulation with no_sync equals accumulation that reduces every micro-batch",
          "[bf16][mpi][train]") {
  // no_sync keeps each parameter's unreduced gradient in f32 across the
  // micro-batches: the gradient of the cast that is gathered belongs to the
  // parameter, not to the cast.
  // The two sum the same f32 gradients in another order (each micro-batch
  // reduced, or the micro-batches' sum reduced once); a weight an f32 ulp
  // apart may cast to another bf16 value (measured 1.4e-6 over 6 steps).
  const Trained synced = train(2, "--precision bf16 --steps 6 --grad-accum 2");
  const Trained local = train(2, "--precision bf16 --steps 6 --grad-accum 2 --no-sync");
  compare(local.losses, synced.losses, 1e-5);
  CHECK(local.losses.back() < local.losses.front());
}

TEST_CASE("bf16: a resumed run continues bit for bit from the f32 master weights", "[bf16][mpi][train]") {
  const std::filesystem::path ckpt = fsdpc::testing::scratch("bf16-ckpt");
  std::filesystem::remove_all(ckpt);
  const std::string flags = "--precision bf16 --strategy zero3";
  const Trained whole = train(2, flags + " --steps 6");
  train(2, flags + " --steps 3 --save '" + ckpt.string() + "'");
  const Trained resumed = train(2, flags + " --steps 6 --resume '" + ckpt.string() + "'");
  REQUIRE(resumed.losses.size() == 3);
  for (size_t s = 0; s < 3; ++s) CHECK(resumed.losses[s] == whole.losses[3 + s]);
}

TEST_CASE("bf16: without AVX-512 the products widen to f32 and train, and the header says so", "[bf16][mpi][train]") {
  const Trained native = train(1, "--precision bf16 --steps 4");
  const Trained capped = train(1, "--precision bf16 --steps 4", "ONEDNN_MAX_CPU_ISA=AVX2");
  CHECK_THAT(capped.output, Catch::Contains("bf16 matmuls widened to f32"));
  CHECK_THAT(capped.output, Catch::Contains("(ISA avx2"));
  // Other kernels sum in another order: close, not equal.
  compare(capped.losses, native.losses, 1e-3);
}
