// Pipeline parallelism's stage split: one captured trace becomes one trace
// per pipeline stage (passes/pipeline_split.cpp).
#pragma once

#include <string>
#include <vector>

#include "ir/trace.h"

namespace fsdpc {

struct PipelineSplitOptions {
  int stages = 1;            // --pp P
  std::vector<int> balance;  // blocks per stage (--pp-balance); empty: balanced by parameters
};

struct PipelineStageTrace {
  Trace trace;
  std::string input;   // the activation argument received from the stage before; "" for stage 0
  std::string output;  // the activation returned for the next stage; "" for the last (the loss)
  std::vector<std::string> blocks;  // the blocks it runs ("h.0", "h.1")
};

// Pre:  a captured trace (before tp and fsdp) whose parameters carry module
//       paths with numbered blocks ("h.3.attn.qkv.weight"), at least
//       `stages` of them; one activation crosses each cut between blocks.
// Post: `stages` traces. Stage s runs its contiguous run of blocks plus the
//       statements before the first block (stage 0) or after the last (the
//       last stage). Every stage takes every non-parameter argument of the
//       captured trace (the batch), then, after the first stage, the
//       boundary activation under its original name, then the parameters it
//       reads, in their original order (a tied parameter is read by two
//       stages); parameter-free statements computed from the batch alone
//       (positions, masks, rotary tables) are recomputed by each stage that
//       needs them. Stage s < P-1 returns its boundary activation; the last
//       stage returns what the captured trace returned.
// Throws fsdpc::Error when the model has fewer blocks than stages, the
// balance list is malformed, or a cut is crossed by other than one value.
std::vector<PipelineStageTrace> pipeline_split(const Trace& captured, const PipelineSplitOptions& options);

}  // namespace fsdpc
