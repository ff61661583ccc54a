// Process-group membership on the device mesh.
#include "ir/mesh.h"

#include "ir/error.h"

namespace fsdpc {

Mesh flat_mesh(int world) {
  if (world < 1) fail("world size must be at least 1, got ", world);
  return Mesh{1, world};
}

int Mesh::group_size(const std::string& name) const {
  if (name == "dp") return data_parallel();
  if (name == "shard") return shards;
  if (name == "replicate") return replicas;
  if (name == "tp") return tp;
  fail("unknown process group '", name, "' (expected dp, shard, replicate or tp)");
}

std::vector<int> Mesh::group_ranks(const std::string& name, int rank) const {
  if (rank < 0 || rank >= world()) fail("rank ", rank, " outside a world of ", world());
  std::vector<int> ranks;
  // The data-parallel coordinates of this rank, and its place in its tp group.
  const int d = rank / tp, t = rank % tp;
  const int replica = d / shards, index = d % shards;
  if (name == "dp") {
    for (int r = 0; r < data_parallel(); ++r) ranks.push_back(r * tp + t);
  } else if (name == "shard") {
    for (int s = 0; s < shards; ++s) ranks.push_back((replica * shards + s) * tp + t);
  } else if (name == "replicate") {
    for (int r = 0; r < replicas; ++r) ranks.push_back((r * shards + index) * tp + t);
  } else if (name == "tp") {
    for (int i = 0; i < tp; ++i) ranks.push_back(d * tp + i);
  } else {
    group_size(name);  // throws the unknown-group error
  }
  return ranks;
}

}  // namespace fsdpc
