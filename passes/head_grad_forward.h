// head_grad_forward: the fused head's loss and both its gradients from one
// product of logits. After grad, a training step's joint trace holds
//   loss = linear_cross_entropy(h, w, targets)                  (forward)
//   dh, dw = linear_cross_entropy_grad(h, w, targets, cotangent) (backward)
// and the gradient recomputes every chunk of logits the forward made: one
// more [rows, C] x [C, V] product a step, the head's 3 becoming 4 (GPT-2 at
// 1024 tokens: 9% of the step at one thread). When the gradient's g is the
// joint trace's `cotangent` argument itself (the head's loss is the step's
// loss, as in every language model here) the cotangent is known before the
// forward runs, and the pair becomes one statement where the loss was:
//   loss, dh, dw = linear_cross_entropy_with_grad(h, w, targets, cotangent)
// whose kernel turns each chunk of logits into the loss's terms and then at
// once into the gradients' (Liger's fused linear cross-entropy). split then
// saves dh and dw for the backward instead of h, w and the targets; the
// forward takes the cotangent (the engine hands it to both); under zero3 the
// backward no longer re-gathers the head's weight.
//
// Memory: dw, parameter-sized, lives from the head's forward to its use at
// the start of the backward, where the recomputing gradient made the same
// buffer beside the re-gathered weight; the plan replays either. Not run for
// a pipeline stage (compile_joint): GPipe runs every micro-batch's forward
// before any backward, and would hold a dw for each.
//
// Pre:  verify(trace) passes; a joint trace from grad() (its args end with
//       `cotangent`), no fusion regions, no `del` yet.
// Post: verify() passes. Each linear_cross_entropy_grad whose input 3 is
//       the `cotangent` argument, and the linear_cross_entropy of the same
//       h, w, targets and chunk, are one
//       linear_cross_entropy_with_grad at the loss's place, with the
//       gradient's attributes (chunk, dw_dtype) and both statements'
//       output names. Everything else is kept in order; provenance
//       "head_grad_forward". A trace with nothing to rewrite comes back as it
//       was.
#pragma once

#include "ir/trace.h"

namespace fsdpc {

Trace head_grad_forward(const Trace& trace);

// The forward of an evaluation (Engine::forward: the loss alone) from a
// training forward, compiled or not: each linear_cross_entropy_with_grad
// back to linear_cross_entropy (its executor kept), its gradients no longer
// returned, and the `cotangent` argument gone when nothing else reads it.
// A forward without one comes back as it was.
Trace without_head_grads(const Trace& forward);

}  // namespace fsdpc
