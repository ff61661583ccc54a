// bucketing: one collective per FSDP unit, and DDP gradient buckets
// (see passes/bucketing.cpp).
#pragma once

#include <string>
#include <vector>

#include "ir/trace.h"
#include "passes/strategy.h"
#include "passes/wrap.h"

namespace fsdpc {

struct BucketingOptions {
  Strategy strategy = Strategy::zero3;
  std::vector<Unit> units;    // from wrap_units()
  bool unit_buckets = false;  // --bucketing unit (FSDP strategies)
  double bucket_mb = 25.0;    // no_shard: gradient bucket size in MiB
  // --gather-dtype int8: a unit's shards each quantized (passes/quantize_gathers.h)
  // before they are packed, so that no block of codes straddles two parameters.
  bool int8_gathers = false;
  // The parameter each gradient the backward returns belongs to, in return
  // order: grad()'s parameters with requires_grad, in argument order. The
  // backward alone cannot tell (it holds only the saved parameters), so FSDP
  // gradient buckets need it; when empty, gradients stay per parameter.
  std::vector<std::string> grad_params;
};

// Applied to the forward and to the backward trace of split.
Trace bucketing(const Trace& trace, const BucketingOptions& options);

// The grad_params of a trace's parameter arguments (the fsdp stage's).
std::vector<std::string> gradient_params(const Trace& trace);

}  // namespace fsdpc
