// Catch2's main for tests run under mpirun: MPI is initialized before any
// test, and every rank exits non-zero when any rank saw a failure.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "executors/comm/mpi_check.h"
#include "executors/comm/mpi_world.h"

int main(int argc, char** argv) {
  fsdpc::mpi_init(&argc, &argv);
  int failed = Catch::Session().run(argc, argv);
  // One rank's failure must fail the job whichever rank mpirun reports on.
  int failed_anywhere = 0;
  FSDPC_MPI_CHECK(MPI_Allreduce(&failed, &failed_anywhere, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  return failed_anywhere != 0 ? 1 : 0;  // MPI_Finalize runs at exit (mpi_init)
}
