// DiLoCo's outer step (fsdpc train --outer-steps): see passes/outer_step.cpp.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/mesh.h"
#include "ir/trace.h"
#include "passes/strategy.h"

namespace fsdpc {

// DiLoCo (Douillard et al. 2023): the replicas of a hybrid mesh train apart
// for `outer_steps` inner steps, without the per-step all_reduce of the
// gradients over `replicate`, then meet in an outer step. The defaults are
// the paper's. Streaming DiLoCo (Douillard et al. 2025) splits the model
// into fragments that meet at staggered steps of the round, each exchange
// optionally left in flight for `outer_delay` inner steps.
struct DilocoOptions {
  int outer_steps = 0;          // H; 0: off (every step all-reduces over replicate)
  double outer_lr = 0.7;        // the outer SGD's rate
  double outer_momentum = 0.9;  // its Nesterov momentum; 0: plain SGD, no buffer
  // What crosses the slow link: f32 (an all_reduce), bf16 (each replica's
  // delta rounded to bf16 and all-gathered, the sum taken in f32) or i8
  // (the delta quantized in int8 blocks, ir/quantize.h, all-gathered,
  // dequantized and summed in f32).
  DType outer_dtype = DType::f32;
  // Streaming: F fragments of whole FSDP units, fragment f meeting after the
  // optimizer steps k > 0 with k % H == f * H / F; 1: the whole model at once.
  int outer_fragments = 1;
  // tau: a fragment's exchange is issued at its step and landed tau inner
  // steps later (the replicas train on meanwhile); 0: landed at once.
  int outer_delay = 0;
  // alpha: a landed fragment's parameters become alpha * the replica's own
  // + (1 - alpha) * the new anchor. Negative: the paper's 0.5 with a delay,
  // 0 (the anchor alone) without one, see mix().
  double outer_mix = -1;
  bool enabled() const { return outer_steps > 0; }
  bool streaming() const { return outer_fragments > 1 || outer_delay > 0; }
  double mix() const { return outer_mix >= 0 ? outer_mix : outer_delay > 0 ? 0.5 : 0.0; }
  // The optimizer step after which fragment f meets first (and every H after).
  int fragment_offset(int f) const {
    return static_cast<int>(static_cast<int64_t>(f) * outer_steps / outer_fragments);
  }
};

// fsdpc::Error naming the flag: H, rate or momentum out of range, or DiLoCo
// on a strategy without replicas (it needs hybrid or hybrid_zero2), or an
// outer dtype other than f32, bf16 and i8; fragments below 1, a delay that
// would not land before the fragment's next exchange (tau >= H), a mix
// outside [0, 1), or streaming flags without --outer-steps.
void check_diloco_options(const DilocoOptions& d, Strategy strategy);

// One fragment's outer step (Streaming DiLoCo). Without a delay, `step` is
// the outer trace of its parameters alone. With one it is cut at its waits:
//   issue(theta, anchor ...)  -> (future ..., wire ...): each delta, put on
//                                the link; the wires are the collectives'
//                                inputs, which must outlive the issue;
//   land(future ...)          -> (mean ...): the waits, and the sums of a
//                                gathered exchange;
//   update(mean ..., theta, anchor[, momentum] ...)
//                             -> (anchor' ..., [momentum' ...], [theta' ...]).
// Futures are named outer_ft<N>, unique over every fragment and apart from
// the step traces', so that several can be in flight across steps.
struct OuterFragment {
  std::vector<std::string> params;  // the parameters' proxy names, argument order
  int offset = 0;                   // DilocoOptions::fragment_offset
  Trace step;                       // without a delay
  Trace issue, land, update;        // with one (else empty)
  // The parameter (proxy name) each of land's returns belongs to.
  std::vector<std::string> landed_params;
  bool delayed() const { return !issue.bsyms.empty(); }
  // The traces it runs: {step}, or with a delay {issue, land, update}.
  std::vector<const Trace*> traces() const {
    return delayed() ? std::vector<const Trace*>{&issue, &land, &update} : std::vector<const Trace*>{&step};
  }
  std::vector<Trace*> traces() {
    return delayed() ? std::vector<Trace*>{&issue, &land, &update} : std::vector<Trace*>{&step};
  }
};

// The outer dtype as --outer-dtype spells it: f32, bf16, int8.
std::string_view outer_dtype_name(DType d);

// Pre:  `sharded`'s parameter arguments are this rank's shards (the fsdp
//       pass's output, passes/fsdp.h, or a later trace); d.enabled().
// Post: the trace "outer", which verifies. Its arguments, for each parameter
//       that requires grad in argument order: the parameter's value (the
//       proxy as `sharded` has it, param_path kept), anchor_<p> and, when
//       outer_momentum != 0, momentum_<p>. It returns (anchor'...,
//       momentum'...), each in that order:
//         delta     = (anchor - theta) / R           (R = mesh.replicas)
//         delta     = all_reduce(delta, replicate)   (sum: the mean over replicas)
//                     or, with outer_dtype bf16, the sum over dim 0 in f32 of
//                     f32(all_gather(bf16(delta), replicate)), flattened;
//                     with i8, of dequantize(all_gather(quantize(delta)))
//         momentum' = outer_momentum * momentum + delta
//         anchor'   = anchor - outer_lr * (delta + outer_momentum * momentum')
//         theta'    = mix * theta + (1 - mix) * anchor'   (only when mix > 0)
//       which is torch.optim.SGD(nesterov=True) taking the averaged delta as
//       the anchor's gradient; theta' follows the momenta in the returns. The
//       caller then sets theta <- theta' (or anchor' without a mix). Every
//       all_reduce is issued before the first wait, and `del` frees each
//       value after its last use.
// The arguments are typed as local tensors (dist none) of the shard's
// shape: the step is elementwise arithmetic on each rank's own rows, which
// the IR's elementwise ops take only from values that are not shards.
Trace outer_step_trace(const Trace& sharded, const DilocoOptions& d, const Mesh& mesh);

// The parameters that train split into d.outer_fragments fragments of whole
// FSDP units (wrap_units(sharded, wrap), in their order), contiguous, each
// cut placed where the running parameter count is nearest an even share.
// Each fragment's traces are cut from outer_step_trace's (so the exchange of
// outer_step_trace's helpers is the fragments' too). fsdpc::Error when there
// are fewer units that train than fragments.
std::vector<OuterFragment> outer_fragments(const Trace& sharded, const DilocoOptions& d, const Mesh& mesh,
                                           const std::string& wrap);

}  // namespace fsdpc
