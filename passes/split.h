// split: the joint forward+backward trace cut into the forward and backward
// traces each rank runs (see passes/split.cpp).
#pragma once

#include <string>
#include <unordered_set>
#include <vector>

#include "ir/trace.h"

namespace fsdpc {

struct SplitOptions {
  // zero3/hybrid: gathered parameters are not saved for the backward, which
  // re-gathers them from the shards (all_gather is recomputable).
  bool regather_params = false;
  // Forward values the backward recomputes instead of receiving, beyond the
  // parameter-derived chains above (passes/remat.h decides them); null: none.
  const std::unordered_set<std::string>* recomputable = nullptr;
};

struct SplitResult {
  Trace forward;
  Trace backward;
  std::vector<std::string> saved;  // saved_for_backward, in order
};

SplitResult split(const Trace& joint, const SplitOptions& options = {});

// The ops regather_params recomputes in the backward besides the cheap ones
// (OpTrait::cheap): a parameter's all_gather and its wait. Recomputing them
// is this option's policy, not a property of the ops, so it is here rather
// than a trait in ir/ops.def; remat follows the same policy.
bool is_regather(OpId op);

// Which statements of a joint trace the forward holds: those its outputs
// (every return item but the last, the gradients) depend on.
std::vector<bool> forward_statements(const Trace& joint);

}  // namespace fsdpc
