// The process-wide MPI lifetime (with how collectives progress, and the
// progress thread), and ProcessGroups: one MPI communicator per process-group
// name a trace's collectives use (dp, shard, replicate).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "executors/comm/world.h"
#include "ir/mesh.h"

namespace fsdpc {

// How started collectives advance while the rank computes
// (FSDPC_MPI_PROGRESS; mpi_executor.h explains why it matters):
// - poll: the runtime tests them between kernels (MpiContext::progress());
//   nothing moves during a long kernel. MPI_THREAD_FUNNELED.
// - thread: as poll, and a progress thread also drives Open MPI's progress
//   engine (MPI_Iprobe on a private communicator) whenever collectives are
//   pending and the rank's thread has made no MPI call for kProgressPause
//   (500 us: during a long kernel), unless that thread is inside a wait.
//   MPI_THREAD_MULTIPLE. The rank's thread keeps every request.
enum class MpiProgress { poll, thread };

// FSDPC_MPI_PROGRESS is poll (the default; also unset or empty), thread, or
// auto: thread when the launcher placed the ranks on more than one node
// (Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE < OMPI_COMM_WORLD_SIZE, or MPICH's
// MPI_LOCALNRANKS < PMI_SIZE), poll otherwise. mpi_executor.h says why.

// mpi_init() (declared in executors/comm/world.h, with mpi_world_rank() and
// mpi_world_size()) initializes MPI once per process; later calls do
// nothing. It asks for the thread level FSDPC_MPI_PROGRESS needs: FUNNELED for poll,
// where only the thread that called this (the runtime's interpreter) calls
// MPI while compute threads (oneDNN, OpenMP) never do; MULTIPLE for thread.
// An MPI that offers less than MULTIPLE falls back to poll, unless thread
// was asked for by name (then fsdpc::Error). A value other than poll or
// thread is an fsdpc::Error, raised before MPI starts. Registers
// MPI_Finalize with std::atexit (the progress thread is joined first).
// Creates the bf16 and f16 MPI_Ops (mpi_reduce_ops.h), freed at the start
// of MPI_Finalize.
// Started without mpirun, the world is a singleton of 1. If MPI was already
// initialized by someone else, it is left to them, and thread mode is used
// only if they asked for MPI_THREAD_MULTIPLE. argc/argv may be null.

// The mode this process runs in (calls mpi_init()), and its name.
MpiProgress mpi_progress();
const char* mpi_progress_name(MpiProgress mode);

// Thread mode, called on the rank's thread (the MPI executor does): a
// collective was started (the first call starts the progress thread), and
// one was completed. The thread runs only while some are pending.
void mpi_progress_started();
void mpi_progress_completed();
// Reports a failed MPI call of the progress thread, on the calling thread,
// exactly as FSDPC_MPI_CHECK does for its own (file:line, the call, MPI's
// message; then abort). Does nothing when none failed.
void mpi_progress_check();
// Thread mode: the rank's thread just tested its pending collectives, so
// the progress thread need not probe for another kProgressPause.
void mpi_progress_polled();
// How many times the progress thread has called MPI (0 in poll mode): its
// cost, for benchmarks.
uint64_t mpi_progress_probes();

// While one lives, the rank's thread is inside a wait that progresses by
// itself (MPI_Wait, or mpi_wait_watched's MPI_Test loop), and the progress
// thread rests rather than contend for the rank's core and Open MPI's locks.
class MpiWaitScope {
 public:
  MpiWaitScope();
  ~MpiWaitScope();
  MpiWaitScope(const MpiWaitScope&) = delete;
  MpiWaitScope& operator=(const MpiWaitScope&) = delete;
};

// The processes of the world on this host (MPI_COMM_TYPE_SHARED): collective
// over the world.
int mpi_ranks_on_host();

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

// ---- The collective watchdog's side of MPI ----------------------------------
// Every wait for a collective (the trace's, and the runtime's own blocking
// ones: loss, clipping, stop agreement, barriers) goes through
// mpi_wait_watched(). With a CollectiveWatch installed (fsdpc train installs
// runtime/reliability/watchdog.h's), the wait polls its request with MPI_Test and hands
// control to the watch at safe points and when the timeout passes; without
// one it is MPI_Wait, unbounded, as a library user's MPI job expects.

// One collective as the watch sees it. The strings are only read during
// issued(): the watch copies what it keeps into fixed storage.
struct CollectiveInfo {
  std::string_view op;         // "all_gather", "all_reduce", "barrier"
  std::string_view output;     // "ft9", or the runtime's label ("loss")
  std::string_view input;      // "t_0_weight"; empty for the runtime's own
  std::string_view group;      // "dp", "shard", "replicate", "world"
  MPI_Comm comm = MPI_COMM_NULL;
  int64_t count = 0;           // elements sent by this rank
  std::string_view dtype;      // "f32"
  int64_t bytes = 0;           // of the result
};

class CollectiveWatch {
 public:
  virtual ~CollectiveWatch() = default;
  // A collective was started; the id names it in completed() and expired().
  virtual uint64_t issued(const CollectiveInfo& c) = 0;
  virtual void completed(uint64_t id) = 0;
  // About every 100 ms while a wait blocks: a safe point (never a signal
  // handler) for work such as a flight recorder dump asked for by SIGUSR1.
  virtual void waiting() = 0;
  // The wait for `id` passed timeout_s(): report and end the job.
  [[noreturn]] virtual void expired(uint64_t id, double waited_s) = 0;
  virtual double timeout_s() const = 0;
};

// The process's watch (not owned; null: none). Set before the first
// collective and left in place until exit.
void set_collective_watch(CollectiveWatch* watch);
CollectiveWatch* collective_watch();

// Completes `request` (started for the collective the watch knows as `id`):
// MPI_Wait without a watch; with one, MPI_Test polling that calls waiting()
// at safe points and expired() once the watch's timeout passes. Does not
// call completed(): the caller does, once.
void mpi_wait_watched(MPI_Request* request, uint64_t id);
// Matches the next message from `source` with `tag` on `comm` (MPI_Mprobe),
// for the receive the watch knows as `id`, bounded the same way: MPI_Mprobe
// without a watch; with one, MPI_Improbe polling with safe points and the
// timeout. The caller receives `*message` (MPI_Mrecv or MPI_Imrecv).
void mpi_mprobe_watched(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status, uint64_t id);

// The runtime's blocking collectives, bounded and recorded like the trace's:
// started non-blocking, waited with mpi_wait_watched. `label` names them in
// the flight recorder and in a timeout's message ("loss", "stop agreement").
void watched_allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                       std::string_view label, std::string_view group);
void watched_barrier(MPI_Comm comm, std::string_view label, std::string_view group);
void watched_allgather(const void* send, int count, MPI_Datatype type, void* recv, MPI_Comm comm,
                       std::string_view label, std::string_view group);
void watched_bcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm, std::string_view label,
                   std::string_view group);

// The bound on every wait for a collective, in seconds: what
// set_collective_timeout() set (fsdpc train --timeout), else FSDPC_TIMEOUT_S,
// else FSDPC_NCCL_TIMEOUT_S (the NCCL path's older name), else 600. A value
// that is not a positive number is an fsdpc::Error naming its source.
void set_collective_timeout(double seconds);
double collective_timeout();
// "5", "2.5": a positive, finite number of seconds; fsdpc::Error naming
// `source` ("--timeout", "FSDPC_TIMEOUT_S") otherwise.
double parse_timeout_seconds(const std::string& text, const std::string& source);

// "flat mesh of 3 ranks", "2x2 mesh (replicas x shards)": for messages.
std::string mesh_description(const Mesh& mesh);

}  // namespace fsdpc
