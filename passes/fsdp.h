// The sharding transform (fsdp, ddp and hybrid strategies): see passes/fsdp.cpp.
#pragma once

#include "ir/mesh.h"
#include "ir/trace.h"
#include "passes/strategy.h"

namespace fsdpc {

struct FsdpOptions {
  Strategy strategy = Strategy::zero3;
  // zero3/zero2/no_shard: a flat mesh of the world; hybrid: R replicas x S shards.
  Mesh mesh;
  // hybrid: false under DiLoCo (passes/outer_step.h), whose replicas train
  // apart: the gradients are reduced over `shard` only, without the
  // all_reduce over `replicate`.
  bool sync_replicas = true;
};

// The shard of dimension 0 each rank holds: ceil(d0 / size) rows.
int64_t shard_rows(int64_t d0, int64_t size);

Trace fsdp(const Trace& trace, const FsdpOptions& options);

}  // namespace fsdpc
