// NcclWorld: one NCCL communicator per process-group name a trace's
// collectives use (dp, shard, replicate), for this rank, with the members
// and order of the MPI communicators of ProcessGroups (executors/comm/mpi_world.h),
// which also carry the bootstrap: each group's unique id is broadcast over
// the group's MPI communicator.
#pragma once

#include <nccl.h>

#include <string>
#include <vector>

#include "executors/comm/mpi_world.h"

namespace fsdpc {

class NcclWorld {
 public:
  // Collective over MPI_COMM_WORLD, as ProcessGroups is: every rank builds
  // it from the same mesh at the same point of the program, with its CUDA
  // device (made current here: NCCL binds a communicator to the current
  // device). Groups are created in one fixed order on every rank, so the
  // blocking ncclCommInitRank of one group never waits on a rank that is
  // still initialising another. Groups with the same members (shard and dp
  // on a flat mesh, all three in a world of one) share one communicator:
  // each costs device memory and init time, and the kernels issue on one
  // stream, so sharing orders nothing differently.
  NcclWorld(const ProcessGroups& groups, int device);
  // ncclCommDestroy on a clean exit; ncclCommAbort when an exception is in
  // flight (a peer may never reach its own destroy) or after abort_all().
  ~NcclWorld();
  NcclWorld(const NcclWorld&) = delete;
  NcclWorld& operator=(const NcclWorld&) = delete;

  // The communicator of group `name` holding this rank; throws fsdpc::Error
  // for a name the mesh does not know. Null after abort_all().
  ncclComm_t comm(const std::string& name) const;

  struct Group {
    std::string name;
    ncclComm_t comm = nullptr;
    bool owner = false;  // false: shares the communicator of an earlier group
  };
  // Every group, in creation order.
  const std::vector<Group>& groups() const { return groups_; }

  // Aborts every communicator: not collective, and it stops their kernels
  // still running on the device, so streams waiting on them drain. For
  // errors and timeouts; the communicators are unusable afterwards.
  void abort_all() noexcept;
  bool aborted() const { return aborted_; }

 private:
  Mesh mesh_;
  std::vector<Group> groups_;
  bool aborted_ = false;
};

}  // namespace fsdpc
