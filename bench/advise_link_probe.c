/* The link between the two emulated nodes (tools/netns_cluster.sh), measured
 * as fsdpc advise's alpha-beta model reads it: latency from MPI_Allgather of
 * 8 bytes a rank (what one step of a collective costs through MPI; half a
 * ping-pong's round trip, also printed, is less than half of it over TCP),
 * bandwidth from MPI_Allgather of large buffers on 2 ranks (a ring moves
 * (p-1)/p of the output per rank: time = latency + B/2 / bandwidth). Prints
 * one JSON line on rank 0. Built and run by bench/advise_validation.sh
 * (mpicc), not by the project's build. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) fprintf(stderr, "advise_link_probe: needs exactly 2 ranks, got %d\n", size);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  enum { kPings = 2000, kReps = 7 };
  char byte[8] = {0};
  const int peer = 1 - rank;
  for (int warm = 0; warm < 2; ++warm) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < kPings; ++i) {
      if (rank == 0) {
        MPI_Send(byte, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
        MPI_Recv(byte, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(byte, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(byte, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
      }
    }
    byte[0] = (char)(MPI_Wtime() - t0 > 0);  /* keep the loop */
    const double ping = (MPI_Wtime() - t0) / kPings / 2;
    /* A small collective, as fsdpc's MPI executor issues one: median of
     * kReps batches of kPings. */
    char two[16];
    double small[kReps];
    for (int r = 0; r < kReps; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double s = MPI_Wtime();
      for (int i = 0; i < kPings; ++i) {
        MPI_Request req;
        MPI_Iallgather(byte, 8, MPI_BYTE, two, 8, MPI_BYTE, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
      }
      small[r] = (MPI_Wtime() - s) / kPings;
    }
    qsort(small, kReps, sizeof small[0], cmp);
    if (warm) {
      const double latency = small[kReps / 2];
      /* Bandwidth: 16 MiB of output (8 MiB from each rank), median of kReps. */
      const int per_rank = 8 << 20;
      char* in = malloc(per_rank);
      char* out = malloc(2 * (size_t)per_rank);
      for (int i = 0; i < per_rank; ++i) in[i] = (char)i;
      double t[kReps];
      MPI_Allgather(in, per_rank, MPI_BYTE, out, per_rank, MPI_BYTE, MPI_COMM_WORLD);
      for (int r = 0; r < kReps; ++r) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double s = MPI_Wtime();
        MPI_Allgather(in, per_rank, MPI_BYTE, out, per_rank, MPI_BYTE, MPI_COMM_WORLD);
        t[r] = MPI_Wtime() - s;
      }
      qsort(t, kReps, sizeof t[0], cmp);
      const double median = t[kReps / 2];
      const double bandwidth = (double)per_rank / (median - latency);
      if (rank == 0)
        printf("{\"latency_s\": %.9g, \"ping_pong_half_round_trip_s\": %.9g, \"allgather_bytes\": %d, "
               "\"allgather_median_s\": %.9g, \"bandwidth_Bps\": %.9g}\n",
               latency, ping, 2 * per_rank, median, bandwidth);
      free(in);
      free(out);
    }
  }
  MPI_Finalize();
  return 0;
}
