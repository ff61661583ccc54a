// This process's place in the MPI job, as the public API sees it: no MPI
// header, so a program built against the installed library needs none
// (executors/comm/mpi_world.h holds the rest of the MPI world).
#pragma once

namespace fsdpc {

// Initializes MPI once per process; later calls do nothing. Started without
// mpirun, the world is a singleton of 1. If MPI was already initialized by
// someone else, it is left to them. Registers MPI_Finalize with std::atexit.
// argc/argv may be null. The thread level it asks for, and why, are in
// executors/comm/mpi_world.h (FSDPC_MPI_PROGRESS).
void mpi_init(int* argc = nullptr, char*** argv = nullptr);

// This process's rank and the number of processes (mpi_init() first).
int mpi_world_rank();
int mpi_world_size();

}  // namespace fsdpc
