// The process-wide MPI lifetime, and ProcessGroups: one MPI communicator per
// process-group name a trace's collectives use (dp, shard, replicate).
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "ir/mesh.h"

namespace fsdpc {

// Initializes MPI once per process; later calls do nothing. Asks for
// MPI_THREAD_FUNNELED: only the thread that called this (the runtime's
// interpreter) calls MPI, while compute threads (oneDNN, OpenMP) never do;
// more would make Open MPI lock around every call. Registers MPI_Finalize
// with std::atexit. Started without mpirun, the world is a singleton of 1.
// If MPI was already initialized by someone else, it is left to them.
// argc/argv may be null.
void mpi_init(int* argc = nullptr, char*** argv = nullptr);

// This process's rank and the number of processes (mpi_init() first).
int mpi_world_rank();
int mpi_world_size();

// Takes every rank down with `exit_code`: for an error seen by one rank only,
// where the others may already wait inside a collective and a plain exit
// (whose MPI_Finalize waits for them) would hang the job.
[[noreturn]] void mpi_abort(int exit_code);

// The communicators of a mesh's process groups, for this rank. Building one
// is collective over MPI_COMM_WORLD: every rank constructs it with the same
// mesh at the same point of the program. Members of each communicator are in
// the mesh's ascending rank order (Mesh::group_ranks), which is the order the
// reference executor combines them in, so the results match it exactly.
class ProcessGroups {
 public:
  // Calls mpi_init(). Throws fsdpc::Error when the mesh's world differs from
  // the number of processes mpirun started.
  explicit ProcessGroups(const Mesh& mesh);
  ~ProcessGroups();
  ProcessGroups(ProcessGroups&& o) noexcept;
  ProcessGroups& operator=(ProcessGroups&& o) noexcept;
  ProcessGroups(const ProcessGroups&) = delete;
  ProcessGroups& operator=(const ProcessGroups&) = delete;

  const Mesh& mesh() const { return mesh_; }
  int rank() const { return rank_; }  // in MPI_COMM_WORLD (= on the mesh)

  // The communicator of group `name` that holds this rank; throws
  // fsdpc::Error for a name the mesh does not know.
  MPI_Comm comm(const std::string& name) const;
  // Its number of ranks, and this rank's place in it.
  int size(const std::string& name) const;
  int rank_in(const std::string& name) const;

 private:
  struct Group {
    std::string name;
    MPI_Comm comm = MPI_COMM_NULL;
  };
  void free_all();

  Mesh mesh_;
  int rank_ = 0;
  std::vector<Group> groups_;
};

// "flat mesh of 3 ranks", "2x2 mesh (replicas x shards)": for messages.
std::string mesh_description(const Mesh& mesh);

}  // namespace fsdpc
