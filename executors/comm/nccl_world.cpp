// NCCL communicators of a mesh's process groups, bootstrapped over the MPI
// communicators of the same groups.
#include "executors/comm/nccl_world.h"

#include <cstdio>
#include <exception>

#include "executors/comm/mpi_check.h"
#include "executors/comm/nccl_check.h"
#include "executors/cuda/cuda_check.h"
#include "ir/error.h"

namespace fsdpc {

namespace {

// The order ProcessGroups creates its communicators in (mpi_world.cpp); any
// order works as long as every rank uses the same one.
constexpr const char* kGroupNames[] = {"dp", "shard", "replicate", "tp"};

// One group's communicator: its first member makes the unique id, the MPI
// communicator of the group carries it to the others, and every member
// joins with its rank in that communicator (= its place in Mesh::group_ranks).
ncclComm_t make_comm(const ProcessGroups& groups, const std::string& name) {
  const MPI_Comm mpi = groups.comm(name);
  const int size = groups.size(name);
  const int me = groups.rank_in(name);
  ncclUniqueId id{};
  if (me == 0) FSDPC_NCCL_CHECK(ncclGetUniqueId(&id));
  FSDPC_MPI_CHECK(MPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, mpi));
  ncclComm_t comm = nullptr;
  FSDPC_NCCL_CHECK(ncclCommInitRank(&comm, size, id, me));
  int count = 0, rank = 0;
  FSDPC_NCCL_CHECK(ncclCommCount(comm, &count));
  FSDPC_NCCL_CHECK(ncclCommUserRank(comm, &rank));
  FSDPC_CHECK(count == size && rank == me)
      << "NCCL communicator of group " << name << " has " << count << " ranks and puts this one at "
      << rank << "; its MPI communicator has " << size << " and " << me;
  return comm;
}

// Teardown reports instead of aborting: it runs on error paths too.
void report(const char* what, const std::string& group, ncclResult_t rc) {
  std::fprintf(stderr, "fsdpc: %s of the NCCL communicator of group %s returned %s\n", what,
               group.c_str(), ncclGetErrorString(rc));
}

}  // namespace

NcclWorld::NcclWorld(const ProcessGroups& groups, int device) : mesh_(groups.mesh()) {
  FSDPC_CUDA_CHECK(cudaSetDevice(device));
  const int rank = groups.rank();
  for (const char* name : kGroupNames) {
    const std::vector<int> members = mesh_.group_ranks(name, rank);
    // Membership is a function of the mesh alone, so every member of a
    // group takes the same branch here and no init is left half-joined.
    const Group* same = nullptr;
    for (const Group& g : groups_)
      if (g.owner && mesh_.group_ranks(g.name, rank) == members) same = &g;
    if (same) groups_.push_back({name, same->comm, false});
    else groups_.push_back({name, make_comm(groups, name), true});
  }
}

NcclWorld::~NcclWorld() {
  if (aborted_) return;
  // With an exception in flight, a peer may never call its own destroy,
  // whose internal finalize could then wait for it forever.
  if (std::uncaught_exceptions() > 0) {
    abort_all();
    return;
  }
  // Reverse creation order, the same on every rank.
  for (auto it = groups_.rbegin(); it != groups_.rend(); ++it) {
    if (!it->owner || !it->comm) continue;
    const ncclResult_t rc = ncclCommDestroy(it->comm);
    if (rc != ncclSuccess) {
      report("ncclCommDestroy", it->name, rc);
      const ncclResult_t rc2 = ncclCommAbort(it->comm);
      if (rc2 != ncclSuccess) report("ncclCommAbort", it->name, rc2);
    }
    it->comm = nullptr;
  }
}

ncclComm_t NcclWorld::comm(const std::string& name) const {
  for (const Group& g : groups_)
    if (g.name == name) return g.comm;
  mesh_.group_size(name);  // throws the unknown-group error
  FSDPC_CHECK(false) << "no NCCL communicator for group " << name;
  return nullptr;
}

void NcclWorld::abort_all() noexcept {
  if (aborted_) return;
  aborted_ = true;
  for (auto it = groups_.rbegin(); it != groups_.rend(); ++it) {
    if (it->owner && it->comm) {
      const ncclResult_t rc = ncclCommAbort(it->comm);
      if (rc != ncclSuccess) report("ncclCommAbort", it->name, rc);
    }
  }
  for (Group& g : groups_) g.comm = nullptr;
}

}  // namespace fsdpc
