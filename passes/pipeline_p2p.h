// Pipeline parallelism's point-to-point transfers between stages
// (passes/pipeline_p2p.cpp).
#pragma once

#include <string>

#include "passes/split.h"

namespace fsdpc {

// A pipeline stage's place and the activations on its two boundaries.
struct PipelineStagePeers {
  int stage = 0;
  int stages = 1;
  std::string input;   // received from stage-1 (its gradient sent back); "" for stage 0
  std::string output;  // sent to stage+1 (its gradient received); "" for the last stage
};

// Pre:  a stage's forward and backward from split(): the forward takes the
//       boundary activation `input` as an argument and returns `output`
//       first; the backward takes `cotangent` (output's gradient) and
//       returns input's gradient last (grad's input_grads).
// Post: the forward receives `input` from stage-1 first thing and ends by
//       sending `output` to stage+1, returning the sent value in its place;
//       the backward receives its cotangent from stage+1 first thing and
//       ends by sending input's gradient to stage-1, returning it in its
//       place. All on group `pp`. A stage with neither boundary (one stage)
//       is returned as it is.
SplitResult pipeline_p2p(const SplitResult& stage, const PipelineStagePeers& peers);

}  // namespace fsdpc
