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
  if (name == "pp") return pp;
  if (name == "pp_tied") return pp > 1 ? 2 : 1;
  fail("unknown process group '", name, "' (expected dp, shard, replicate, tp, pp or pp_tied)");
}

std::vector<int> Mesh::group_ranks(const std::string& name, int rank) const {
  if (rank < 0 || rank >= world()) fail("rank ", rank, " outside a world of ", world());
  std::vector<int> ranks;
  // Pipeline stage s holds ranks [s * W, (s + 1) * W); inside a stage, the
  // data-parallel coordinates of this rank and its place in its tp group.
  const int w = stage_world(), stage = rank / w, local = rank % w, base = stage * w;
  const int d = local / tp, t = local % tp;
  const int replica = d / shards, index = d % shards;
  if (name == "dp") {
    for (int r = 0; r < data_parallel(); ++r) ranks.push_back(base + r * tp + t);
  } else if (name == "shard") {
    for (int s = 0; s < shards; ++s) ranks.push_back(base + (replica * shards + s) * tp + t);
  } else if (name == "replicate") {
    for (int r = 0; r < replicas; ++r) ranks.push_back(base + (r * shards + index) * tp + t);
  } else if (name == "tp") {
    for (int i = 0; i < tp; ++i) ranks.push_back(base + d * tp + i);
  } else if (name == "pp") {
    for (int s = 0; s < pp; ++s) ranks.push_back(s * w + local);
  } else if (name == "pp_tied") {
    // The first and the last stage's ranks at this place; a middle stage's
    // rank is alone (it holds no tied parameter).
    if (pp > 1 && (stage == 0 || stage == pp - 1)) ranks = {local, (pp - 1) * w + local};
    else ranks = {rank};
  } else {
    group_size(name);  // throws the unknown-group error
  }
  return ranks;
}

}  // namespace fsdpc
