// Parameters gathered once per training step (fsdpc train --keep-gathered;
// PyTorch FSDP's set_reshard_after_backward(False) with no_sync, DeepSpeed's
// ZeRO under pipelines): see passes/gather_once.cpp.
#pragma once

#include "ir/trace.h"

namespace fsdpc {

// The two step-level traces around the micro-batches. `gather` takes the
// shard of every parameter (its arguments are the fsdp trace's parameter
// arguments, in order) and returns the full parameters, in the same order;
// `reduce` takes the step's summed local gradient of every parameter that
// wants one (arguments grad_<parameter proxy>, full shape, in argument order)
// and returns this rank's reduced gradient shards, the ones a synchronising
// backward returns.
struct GatherOnceTraces {
  Trace gather, reduce;
};

// Pre:  `sharded` is the output of the fsdp pass (passes/fsdp.h): each
//       parameter argument is read through one synchronize.
// Post: both traces verify; each synchronize is lowered exactly as autodiff
//       lowers it (passes/vjp_rules.h lower_synchronize and
//       reduce_synchronized_grad), so the arithmetic of the reduction (1/N,
//       padding, reduce_scatter, the hybrid all_reduce) is the synchronising
//       step's; every all_gather and reduce_scatter is issued before the
//       first wait, and `del` frees each value after its last use.
//       With int8_gathers (--gather-dtype int8), the gathers move int8
//       codes (passes/quantize_gathers.h), as the micro-batches' would.
// Throws fsdpc::Error when a parameter is never read (it has no synchronize).
GatherOnceTraces gather_once_traces(const Trace& sharded, bool int8_gathers = false);

}  // namespace fsdpc
