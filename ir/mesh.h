// The device mesh and its process groups, by the names collectives use in a
// trace. The data-parallel part is R replicas x S shards, laid out
// replica-major as PyTorch's HSDP does; a tensor-parallel dimension of T ranks
// is innermost, so the T ranks of one tp group are adjacent (a node's GPUs);
// P pipeline stages are outermost (stage s holds the s-th run of R*S*T ranks):
//   rank = ((stage * R + replica) * S + shard_index) * T + tp_index.
// Groups: "dp" (the R*S data-parallel ranks of this stage with this rank's
// tp index; every rank when T = P = 1), "shard" (the S ranks of one replica),
// "replicate" (the R ranks holding the same shard), "tp" (the T ranks of one
// tensor-parallel group), "pp" (the P ranks at this place in every stage:
// pipeline send/recv) and "pp_tied" (the first and last stage's ranks at this
// place: a parameter both stages read, a tied embedding, has its gradient
// summed there; a middle stage's rank is alone in it). FSDP's collectives use
// dp/shard/replicate, tensor parallelism's tp.
#pragma once

#include <string>
#include <vector>

namespace fsdpc {

struct Mesh {
  int replicas = 1;
  int shards = 1;
  int tp = 1;  // tensor-parallel ranks per group (--tp)
  int pp = 1;  // pipeline stages (--pp), the outermost dimension

  int world() const { return pp * stage_world(); }
  // The ranks of one pipeline stage: every rank when pp = 1.
  int stage_world() const { return replicas * shards * tp; }
  // Ranks that hold different data: world() / tp.
  int data_parallel() const { return replicas * shards; }
  // Ranks of group `name` that contain `rank`, ascending; throws fsdpc::Error
  // for an unknown group name or a rank outside the mesh.
  std::vector<int> group_ranks(const std::string& name, int rank) const;
  // Number of ranks in group `name`.
  int group_size(const std::string& name) const;
};

// A 1-D mesh of `world` ranks (replicas = 1).
Mesh flat_mesh(int world);

}  // namespace fsdpc
