// The device mesh and its process groups, by the names collectives use in a
// trace: "dp" (every rank), and on a 2-D mesh of R replicas x S shards,
// "shard" (the S ranks of one replica) and "replicate" (the R ranks holding
// the same shard). Ranks are laid out replica-major, as PyTorch's HSDP does:
// rank = replica * S + shard_index.
#pragma once

#include <string>
#include <vector>

namespace fsdpc {

struct Mesh {
  int replicas = 1;
  int shards = 1;

  int world() const { return replicas * shards; }
  // Ranks of group `name` that contain `rank`, ascending; throws fsdpc::Error
  // for an unknown group name or a rank outside the mesh.
  std::vector<int> group_ranks(const std::string& name, int rank) const;
  // Number of ranks in group `name`.
  int group_size(const std::string& name) const;
};

// A 1-D mesh of `world` ranks (replicas = 1).
Mesh flat_mesh(int world);

}  // namespace fsdpc
