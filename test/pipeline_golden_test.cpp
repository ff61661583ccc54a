// Golden traces of the compilation pipeline, produced by `fsdpc dump` exactly
// as a user runs it. Each golden holds the trace after every requested stage;
// each was read, and its communication pattern checked, before commit.
#include <catch2/catch.hpp>

#include "test/golden.h"
#include "test/run_cli.h"

namespace {

struct Golden {
  const char* file;
  const char* args;
};

// The goldens named by the FSDP/autodiff issue: the tutorial mlp at worlds 2
// and 3 (3 pads 64 rows to 66) for zero2 and zero3 at every stage; gpt2-tiny
// zero3 with unit buckets and prefetch 1, no_shard with buckets, hybrid on a
// 2x2 mesh; a tied-weight model; and the execution traces (CPU kernels and
// MPI collectives) of mlp and gpt2-tiny. Those pin the unfused execution
// traces (--fusion none); the fused ones (the default) have goldens of their
// own below.
const Golden kGoldens[] = {
    {"mlp-zero3-w2.trace", "--model mlp --world-size 2 --strategy zero3 --stage all --fusion none"},
    {"mlp-zero2-w2.trace", "--model mlp --world-size 2 --strategy zero2 --stage all --fusion none"},
    {"mlp-zero3-w3.trace", "--model mlp --world-size 3 --strategy zero3 --stage all --fusion none"},
    {"mlp-zero2-w3.trace", "--model mlp --world-size 3 --strategy zero2 --stage all --fusion none"},
    {"gpt2-tiny-zero3-unit.trace",
     "--model gpt2-tiny --batch 2 --seq 16 --world-size 2 --strategy zero3 --bucketing unit --prefetch 1 "
     "--stage forward,backward,schedule"},
    {"gpt2-tiny-no_shard.trace",
     "--model gpt2-tiny --batch 2 --seq 16 --world-size 2 --strategy no_shard --bucket-mb 0.1 --stage schedule"},
    {"gpt2-tiny-hybrid-2x2.trace",
     "--model gpt2-tiny --batch 2 --seq 16 --strategy hybrid --mesh 2,2 --bucketing unit --stage schedule"},
    {"mlp-zero3-w2-exec.trace",
     "--model mlp --world-size 2 --strategy zero3 --stage exec --executor cpu --fusion none"},
    // DiLoCo: the backward reduces over shard only; the outer step's trace,
    // with f32, bf16 and int8 between the replicas.
    {"mlp-hybrid-2x2-diloco.trace",
     "--model mlp --strategy hybrid --mesh 2,2 --outer-steps 5 --stage backward,outer_step"},
    {"mlp-hybrid-2x2-diloco-bf16.trace",
     "--model mlp --strategy hybrid --mesh 2,2 --outer-steps 5 --outer-lr 0.5 --outer-momentum 0.8 --outer-dtype bf16 "
     "--stage outer_step"},
    // --gather-dtype int8: each unit's packed shards quantized, gathered as
    // codes and dequantized; the gradients' reduce_scatters as they were.
    {"gpt2-tiny-zero3-unit-int8-gathers.trace",
     "--model gpt2-tiny --batch 2 --seq 16 --world-size 2 --strategy zero3 --bucketing unit --gather-dtype int8 "
     "--stage schedule"},
    {"mlp-hybrid-2x2-diloco-int8.trace",
     "--model mlp --strategy hybrid --mesh 2,2 --outer-steps 5 --outer-dtype int8 --stage outer_step"},
    // Streaming DiLoCo: two fragments (one parameter each under --wrap
    // size:1), each cut at its waits into issue (the bf16 deltas gathered,
    // the futures returned in flight), land (the waits and the f32 sums) and
    // update (Nesterov, then half the replica's own, half the new anchor).
    {"mlp-hybrid-2x2-diloco-streaming.trace",
     "--model mlp --strategy hybrid --mesh 2,2 --wrap size:1 --outer-steps 4 --outer-fragments 2 --outer-delay 1 "
     "--outer-dtype bf16 --stage outer_step"},
    {"gpt2-tiny-zero3-unit-exec.trace",
     "--model gpt2-tiny --batch 2 --seq 16 --world-size 2 --strategy zero3 --bucketing unit --stage exec "
     "--fusion none"},
    // Fused execution traces (--stage fusion): elementwise ops and row reductions as cpu_fusionN
    // regions, every collective and wait where the schedule put it.
    {"mlp-zero3-w2-fusion.trace", "--model mlp --world-size 2 --strategy zero3 --stage fusion --executor cpu"},
    {"gpt2-tiny-zero3-unit-fusion.trace",
     "--model gpt2-tiny --batch 2 --seq 16 --world-size 2 --strategy zero3 --bucketing unit --stage fusion"},
    // Mixed precision: shards cast to bf16 before their gathers; the bf16
    // weight gradients widened to f32 before they are divided and reduced
    // (reduce_dtype=f32, the default).
    {"mlp-zero3-w2-bf16.trace", "--model mlp --world-size 2 --strategy zero3 --precision bf16 --stage autocast,del"},
    // Activation checkpointing: block saves each block's input and recomputes
    // the block where its backward first reads it; selective also keeps the
    // matmul and attention outputs, so no matmul is recomputed.
    {"gpt2-tiny-zero3-remat-block.trace",
     "--model gpt2-tiny --batch 2 --seq 16 --world-size 2 --strategy zero3 --remat block --stage backward"},
    {"gpt2-tiny-zero3-remat-selective.trace",
     "--model gpt2-tiny --batch 2 --seq 16 --world-size 2 --strategy zero3 --remat selective --stage backward"},
    // Llama: each model.layers.N one unit; RoPE's tables built once from
    // iota and shared by every layer; k/v heads repeated for grouped-query
    // attention; rows padded (54, 94, 16 over 2 and 4 ranks).
    {"llama-tiny-zero3-unit.trace",
     "--model llama-tiny --batch 2 --seq 16 --world-size 2 --strategy zero3 --bucketing unit --prefetch 1 "
     "--stage forward,backward,schedule"},
    {"llama-tiny-hybrid-2x2.trace",
     "--model llama-tiny --batch 2 --seq 16 --strategy hybrid --mesh 2,2 --bucketing unit --stage schedule"},
    {"tied-zero3-w2.trace",
     "--trace '" FSDPC_GOLDEN_DIR "/tied.trace' --world-size 2 --strategy zero3 --stage grad,schedule"},
    // Tensor parallelism: the tp pass's gpt2-tiny at T = 2 (one head per
    // rank; c_attn's q|k|v cut in 3 blocks; f before the column-parallel
    // matmuls, g after the row-parallel ones, their biases added once), and
    // its forward times zero3 on 2 data-parallel ranks (the local parameters
    // gathered on dp, the partial sums all-reduced on tp).
    {"gpt2-tiny-tp2.trace", "--model gpt2-tiny --batch 2 --seq 16 --world-size 2 --tp 2 --stage tp"},
    {"gpt2-tiny-tp2-sp.trace",
     "--model gpt2-tiny --batch 2 --seq 16 --world-size 2 --tp 2 --sequence-parallel --stage tp"},
    {"gpt2-tiny-tp2-zero3.trace",
     "--model gpt2-tiny --batch 2 --seq 16 --world-size 4 --tp 2 --strategy zero3 --stage forward"},
    // The fused head split by vocabulary, as it runs: the rank's
    // cpu_linear_cross_entropy_stats after the sequence's all_gather, the
    // max and sum all_reduces on tp; in the backward its gradient and the
    // all_gather's reduce_scatter summing dh's parts.
    {"gpt2-tiny-tp2-sp-fusion.trace",
     "--model gpt2-tiny --batch 2 --seq 16 --world-size 2 --tp 2 --sequence-parallel --stage fusion"},
    // Pipeline parallelism: the cut of gpt2-tiny into 2 stages (stage0: the
    // embeddings and h.0, returning the residual stream; stage1: h.1, ln_f,
    // the tied head and the loss), and both stages' forward and backward
    // times zero3 on 2 data-parallel ranks each: the boundary activation
    // received and sent on pp, its gradient the other way, FSDP's gathers
    // and reductions on dp.
    {"gpt2-tiny-pp2.trace", "--model gpt2-tiny --batch 2 --seq 16 --world-size 2 --pp 2 --stage pp"},
    {"gpt2-tiny-pp2-zero3.trace",
     "--model gpt2-tiny --batch 2 --seq 16 --world-size 4 --pp 2 --strategy zero3 --stage p2p"},
};

#ifdef FSDPC_HAVE_CUDA
// The CUDA execution traces: cuda_* kernels, nccl_* collectives on the comm
// stream, waits on the compute stream, and no collective buffer freed before
// its wait (executors/cuda/stream_plan.h). No GPU is needed to print them.
const Golden kCudaGoldens[] = {
    {"mlp-zero3-w2-cuda-exec.trace",
     "--model mlp --world-size 2 --strategy zero3 --stage exec --executor cuda --fusion none"},
    {"gpt2-tiny-zero3-unit-cuda-exec.trace",
     "--model gpt2-tiny --batch 2 --seq 16 --world-size 2 --strategy zero3 --bucketing unit --stage exec "
     "--executor cuda --fusion none"},
    // Fused for the CUDA fusion executor (NVRTC): cuda_fusionN regions, the
    // stream plan applied after fusion.
    {"mlp-zero3-w2-cuda-fusion.trace", "--model mlp --world-size 2 --strategy zero3 --stage fusion --executor cuda"},
    {"gpt2-tiny-zero3-unit-cuda-fusion.trace",
     "--model gpt2-tiny --batch 2 --seq 16 --world-size 2 --strategy zero3 --bucketing unit --stage fusion "
     "--executor cuda"},
};
#endif

std::string run_dump(const std::string& args) {
  const fsdpc::testing::Run r = fsdpc::testing::run_fsdpc("dump " + args, {.merge = true});
  INFO(r.out.substr(0, 2000));
  REQUIRE(r.code == 0);
  return r.out;
}

// Each golden against what `fsdpc dump` prints now.
template <size_t N>
void check_goldens(const Golden (&goldens)[N]) {
  for (const Golden& g : goldens) {
    INFO("fsdpc dump " << g.args);
    auto r = fsdpc::testing::check_golden(g.file, run_dump(g.args));
    INFO(r.message);
    CHECK(r.ok);
  }
}

}  // namespace

TEST_CASE("pipeline goldens match fsdpc dump", "[golden][pipeline]") { check_goldens(kGoldens); }

#ifdef FSDPC_HAVE_CUDA
TEST_CASE("CUDA execution goldens match fsdpc dump --executor cuda", "[golden][cuda]") {
  check_goldens(kCudaGoldens);
}
#endif
