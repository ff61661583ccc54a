// fuse_head: puts linear_cross_entropy in place of a language model's head,
// the product of the final hidden states with the vocabulary matrix that
// feeds cross_entropy, so that the [tokens, vocab] logits are never a value
// of the trace. Its gradient (passes/vjp_rules_nn.cpp) is then
// linear_cross_entropy_grad, which recomputes the logits chunk by chunk of
// rows; the CPU and CUDA kernels (executors/cpu/cpu_linear_cross_entropy.cpp,
// executors/cuda/cuda_head.cpp) hold one [chunk, vocab] block at a time. For GPT-2 at 2 x 1024 tokens the
// unfused head keeps a 412 MB f32 logits value for the backward and builds
// several more of that size there; fused, neither side holds one.
//
// The head is found in three spellings, each feeding cross_entropy's
// logits and used by nothing else:
//   linear(h, w)                 GPT-2's tied wte, Llama's and Qwen2's lm_head
//   matmul(h, permute(w, [1, 0])) a hand-written head (w [V, C])
// A linear with a bias, another permutation, a product used elsewhere or
// returned, or mixed dtypes are left unfused. Heads on the CPU and on CUDA
// devices alike are fused: both executors have the kernels. The pipeline runs this before tp, which splits a fused head by
// vocabulary into each rank's linear_cross_entropy_stats and the collectives
// that combine them (passes/tensor_parallel_vocab.cpp), so that under tp no
// [tokens, vocab / T] value exists either; an unfused head's cross_entropy
// it rewrites into Megatron's vocabulary-parallel form.
//
// Pre:  verify(trace) passes; the captured trace (or one pipeline stage's
//       cut of it): no collectives yet.
// Post: verify() passes; each matched head is one linear_cross_entropy
//       statement where its cross_entropy was, defining the same name (the
//       loss keeps its name), with `chunk` = options.chunk when that is set;
//       the linear or matmul (and a permute used only by it) is gone;
//       everything else is unchanged and in order; provenance "fuse_head".
//
//   t40 = layer_norm(t39, w, b, eps=1e-05)
//   t41 = linear(t40, t_wte_weight)          ==>   t40 = layer_norm(t39, w, b, eps=1e-05)
//   t42 = cross_entropy(t41, targets)              t42 = linear_cross_entropy(t40, t_wte_weight, targets)
#pragma once

#include <cstdint>
#include <string>

#include "ir/trace.h"

namespace fsdpc {

// --loss-chunk: auto (fused, the kernel's chunk from its byte budget), ROWS
// (fused, ROWS rows of logits per chunk), off (the head as captured).
struct LossChunk {
  bool fuse = true;
  int64_t rows = 0;  // 0: the kernel's choice (auto)
};

// "auto", "off" or the rows, as the CLI spells them.
std::string loss_chunk_name(const LossChunk& c);

Trace fuse_head(const Trace& trace, const LossChunk& options);

}  // namespace fsdpc
