// split: the joint forward+backward trace cut into the forward and backward
// traces each rank runs (see passes/split.cpp).
#pragma once

#include <string>
#include <vector>

#include "ir/trace.h"

namespace fsdpc {

struct SplitOptions {
  // zero3/hybrid: gathered parameters are not saved for the backward, which
  // re-gathers them from the shards (all_gather is recomputable).
  bool regather_params = false;
};

struct SplitResult {
  Trace forward;
  Trace backward;
  std::vector<std::string> saved;  // saved_for_backward, in order
};

SplitResult split(const Trace& joint, const SplitOptions& options = {});

}  // namespace fsdpc
