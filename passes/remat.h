// Rematerialisation (activation checkpointing): which forward values the
// backward recomputes instead of receiving from the forward. It decides the
// set that split() may recompute; split places each recomputed statement in
// the backward right before its first use. See passes/remat.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "ir/trace.h"
#include "passes/wrap.h"

namespace fsdpc {

enum class RematMode {
  none,       // save what the backward reads (only parameter-derived chains are recomputed)
  block,      // save each FSDP unit's input; recompute the unit's forward (full AC)
  selective,  // save matmul, linear and attention outputs; recompute the rest (op-level SAC)
  auto_cut,   // a minimum cut weighted by bytes, recomputing only cheap ops
};

struct RematOptions {
  RematMode mode = RematMode::none;
  // auto only: the activation peak (live bytes beyond the parameters, forward
  // and backward, as trace_stats counts them) the plan must stay under; 0: no budget.
  int64_t budget_bytes = 0;
};

// "none", "block", "selective", "auto" or "auto:BYTES" (the command line's
// form; tools/cli_io.h parses it).
std::string remat_name(const RematOptions& options);

// What one remat decision needs to know about the model and strategy.
struct RematPlan {
  RematMode mode = RematMode::none;
  std::vector<Unit> units;  // FSDP units (wrap_units); "root" is never checkpointed
  // block, and auto under a budget: how many non-root units, first to last,
  // have their forward recomputed from their input (SIZE_MAX: all).
  size_t blocked_units = SIZE_MAX;
  bool regather_params = false;  // zero3/hybrid: gathered parameters are recomputable
};

// The forward values of `joint` (a grad() trace) that the backward may
// recompute instead of receiving; split() recomputes parameter-derived cheap
// chains whatever this says. Empty for RematMode::none.
std::unordered_set<std::string> remat_recomputable(const Trace& joint, const RematPlan& plan);

// The number of units block mode can checkpoint in `joint` (non-root units
// that own forward statements).
size_t checkpointable_units(const Trace& joint, const std::vector<Unit>& units);

}  // namespace fsdpc
