// Process-group membership on the device mesh.
#include "ir/mesh.h"

#include "ir/error.h"

namespace fsdpc {

Mesh flat_mesh(int world) {
  if (world < 1) fail("world size must be at least 1, got ", world);
  return Mesh{1, world};
}

int Mesh::group_size(const std::string& name) const {
  if (name == "dp") return world();
  if (name == "shard") return shards;
  if (name == "replicate") return replicas;
  fail("unknown process group '", name, "' (expected dp, shard or replicate)");
}

std::vector<int> Mesh::group_ranks(const std::string& name, int rank) const {
  if (rank < 0 || rank >= world()) fail("rank ", rank, " outside a world of ", world());
  std::vector<int> ranks;
  int replica = rank / shards, index = rank % shards;
  if (name == "dp") {
    for (int r = 0; r < world(); ++r) ranks.push_back(r);
  } else if (name == "shard") {
    for (int s = 0; s < shards; ++s) ranks.push_back(replica * shards + s);
  } else if (name == "replicate") {
    for (int r = 0; r < replicas; ++r) ranks.push_back(r * shards + index);
  } else {
    group_size(name);  // throws the unknown-group error
  }
  return ranks;
}

}  // namespace fsdpc
