// Every pass in pipeline order, with a one-line description.
#include "passes/registry.h"

namespace fsdpc {

const std::vector<PassInfo>& pass_registry() {
  static const std::vector<PassInfo> kPasses = {
      {"trace", "the captured trace of the model (no pass run)"},
      {"pp", "pipeline parallelism (--pp P > 1): the captured trace cut into P stage traces by blocks; each stage then runs every pass below"},
      {"fuse_head", "the language-model head and its loss as one linear_cross_entropy (--loss-chunk, on by default; with --tp split by vocabulary): no [tokens, vocab] logits"},
      {"tp", "tensor parallelism (--tp T > 1): column/row-parallel attention and MLP, f/g collectives on group tp"},
      {"fsdp", "shard parameters (zero3/zero2/hybrid) or replicate them (no_shard); synchronize before first use"},
      {"autocast", "mixed precision (--precision bf16): cast parameters before gathering; matmuls in bf16, the rest in f32"},
      {"grad", "joint forward+backward trace; lowers synchronize to all_gather/wait and div/reduce_scatter/wait"},
      {"elide", "drop collectives over a group of one rank and divisions by 1 (world size 1, or a mesh dimension of 1)"},
      {"widen", "a bf16 matmul, sum or index_add whose result is cast to f32 at once accumulates into f32 instead (the gradients mixed precision hands to its f32 parameters)"},
      {"scatter_into", "a scatter-add onto zeros that is then added to another gradient scatters into it (a tied embedding's lookup into its head's gradient): one [vocab, C] buffer fewer"},
      {"head_grad_forward", "the fused head's loss and both gradients in one forward statement (linear_cross_entropy_with_grad) when the loss is the step's: no logits recomputed in the backward"},
      {"split", "cut the joint trace into forward and backward; zero3 re-gathers parameters in the backward"},
      {"p2p", "pipeline stages (--pp P > 1): recv the boundary activation and send the output; the backward the other way"},
      {"dce", "remove statements whose results are never used"},
      {"cse", "reuse the result of an identical earlier statement"},
      {"bucketing", "pack each FSDP unit's shards into one flat buffer per collective; DDP gradient buckets"},
      {"schedule", "prefetch all_gathers K units ahead with at most M in flight; reduce_scatter early, wait late"},
      {"del", "free each value after its last use (del t5, t7)"},
  };
  return kPasses;
}

}  // namespace fsdpc
