// MPI's lifetime in an fsdpc process and the communicators of a mesh's
// process groups, split from MPI_COMM_WORLD so members keep the mesh's order.
#include "executors/comm/mpi_world.h"

#include <cstdlib>
#include <utility>

#include "executors/comm/mpi_check.h"
#include "ir/error.h"

namespace fsdpc {

namespace {

bool mpi_finalized() {
  int finalized = 0;
  FSDPC_MPI_CHECK(MPI_Finalized(&finalized));
  return finalized != 0;
}

void finalize_at_exit() {
  if (!mpi_finalized()) MPI_Finalize();  // at exit nothing is left to report to
}

// Every rank creates the same groups in the same order (collective calls).
constexpr const char* kGroupNames[] = {"dp", "shard", "replicate"};

// Our communicators return error codes so FSDPC_MPI_CHECK can name the call.
void return_errors(MPI_Comm comm) { FSDPC_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN)); }

// The communicator of group `name` holding `rank`. dp is the whole world in
// world order, so it is a dup; the others are split with the group's lowest
// rank as color (it names the group uniquely) and the world rank as key, so
// members are ordered as Mesh::group_ranks lists them.
MPI_Comm make_comm(const Mesh& mesh, const std::string& name, int rank) {
  const std::vector<int> members = mesh.group_ranks(name, rank);
  MPI_Comm comm = MPI_COMM_NULL;
  if (name == "dp")
    FSDPC_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  else
    FSDPC_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, members.front(), rank, &comm));
  return_errors(comm);
  int size = 0, me = 0;
  FSDPC_MPI_CHECK(MPI_Comm_size(comm, &size));
  FSDPC_MPI_CHECK(MPI_Comm_rank(comm, &me));
  FSDPC_CHECK(size == static_cast<int>(members.size()) && members[me] == rank)
      << "group " << name << " of rank " << rank << ": communicator of " << size
      << " ranks puts it at " << me << ", the mesh lists " << members.size();
  return comm;
}

}  // namespace

void mpi_init(int* argc, char*** argv) {
  int initialized = 0;
  FSDPC_MPI_CHECK(MPI_Initialized(&initialized));
  if (initialized) return;
  int provided = 0;
  FSDPC_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
  FSDPC_CHECK(provided >= MPI_THREAD_FUNNELED)
      << "MPI provides thread level " << provided << ", fsdpc needs MPI_THREAD_FUNNELED";
  return_errors(MPI_COMM_WORLD);
  std::atexit(finalize_at_exit);
}

int mpi_world_rank() {
  mpi_init();
  int rank = 0;
  FSDPC_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  return rank;
}

int mpi_world_size() {
  mpi_init();
  int size = 0;
  FSDPC_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  return size;
}

void mpi_abort(int exit_code) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized && !mpi_finalized()) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::exit(exit_code);
}

std::string mesh_description(const Mesh& mesh) {
  if (mesh.replicas == 1) return "flat mesh of " + std::to_string(mesh.world()) + " ranks";
  return std::to_string(mesh.replicas) + "x" + std::to_string(mesh.shards) +
         " mesh (replicas x shards)";
}

ProcessGroups::ProcessGroups(const Mesh& mesh) : mesh_(mesh) {
  const int world = mpi_world_size();
  // Checked before any collective call: every rank sees the same sizes and
  // throws together, so none is left waiting in MPI_Comm_split.
  if (mesh.replicas < 1 || mesh.shards < 1 || mesh.world() != world)
    fail("the ", mesh_description(mesh), " needs ", mesh.world(), " processes, mpirun started ",
         world, " (launch with mpirun -np ", mesh.world(), ")");
  rank_ = mpi_world_rank();
  for (const char* name : kGroupNames) groups_.push_back({name, make_comm(mesh_, name, rank_)});
}

ProcessGroups::~ProcessGroups() { free_all(); }

ProcessGroups::ProcessGroups(ProcessGroups&& o) noexcept
    : mesh_(o.mesh_), rank_(o.rank_), groups_(std::exchange(o.groups_, {})) {}

ProcessGroups& ProcessGroups::operator=(ProcessGroups&& o) noexcept {
  if (this != &o) {
    free_all();
    mesh_ = o.mesh_;
    rank_ = o.rank_;
    groups_ = std::exchange(o.groups_, {});
  }
  return *this;
}

void ProcessGroups::free_all() {
  // A static ProcessGroups may outlive the atexit MPI_Finalize; its
  // communicators died with MPI then.
  if (!groups_.empty() && !mpi_finalized())
    for (Group& g : groups_) FSDPC_MPI_CHECK(MPI_Comm_free(&g.comm));
  groups_.clear();
}

MPI_Comm ProcessGroups::comm(const std::string& name) const {
  for (const Group& g : groups_)
    if (g.name == name) return g.comm;
  mesh_.group_size(name);  // throws the unknown-group error
  FSDPC_CHECK(false) << "no communicator for group " << name;
  return MPI_COMM_NULL;
}

int ProcessGroups::size(const std::string& name) const {
  int size = 0;
  FSDPC_MPI_CHECK(MPI_Comm_size(comm(name), &size));
  return size;
}

int ProcessGroups::rank_in(const std::string& name) const {
  int rank = 0;
  FSDPC_MPI_CHECK(MPI_Comm_rank(comm(name), &rank));
  return rank;
}

}  // namespace fsdpc
