// The MPI executor ("mpi"): collectives of CPU tensors, started non-blocking
// on the communicator of their process group and completed by `wait`.
//
// Progress. Open MPI moves a non-blocking collective forward only while some
// MPI call runs on the rank: its libnbc schedules advance in opal_progress,
// and no thread of Open MPI's drives that for us. A collective started
// before a long stretch of compute would otherwise sit idle until its wait,
// and prefetching would overlap nothing.
// So MpiContext::progress() tests every pending request (MPI_Test, which runs
// the progress engine once), and the runtime calls it between kernels. That
// costs nothing when nothing is pending and well under a microsecond when
// something is. A progress thread was rejected: it needs MPI_THREAD_MULTIPLE
// (Open MPI then locks around every call) and burns a core that CPU training
// uses for compute.
//
// Buffers (the runtime's side of the contract). The runtime allocates every
// output before the kernel runs, as for compute kernels. A collective reads
// its input and writes its future's buffer until the matching `wait`
// returns, so both must stay alive until then (passes/del.cpp frees a
// collective's input after its wait). `wait` may be given the future's own
// buffer as its output (no copy) or another one (copied).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "executors/comm/mpi_world.h"
#include "executors/executor.h"

namespace fsdpc {

// A started collective, keyed by its future's name until its wait.
struct PendingCollective {
  MPI_Request request = MPI_REQUEST_NULL;
  bool complete = false;   // progress() saw it finish
  void* result = nullptr;  // the future's buffer
  int64_t bytes = 0;       // of the result
  // A gather along dim > 0 lands here as one block per member and is
  // interleaved into the result at wait; a reduce_scatter along dim > 0
  // sends its reordered input from here. Must live until completion.
  std::vector<std::byte> scratch;
  int64_t outer = 0;        // gather: rows before `dim` (0: no interleave)
  int64_t inner_bytes = 0;  // gather: bytes of one member's piece of a row
  int members = 0;
};

// What the MPI kernels need beyond their operands: the communicators and
// the requests between a collective and its wait.
class MpiContext : public KernelContext {
 public:
  // Collective over the world: see ProcessGroups.
  explicit MpiContext(const Mesh& mesh);
  explicit MpiContext(ProcessGroups groups);
  // Waits for collectives never waited on (e.g. after an error unwound the
  // interpreter on every rank): MPI cannot cancel them, and they write into
  // their buffers, so the runtime must destroy the context before those.
  ~MpiContext() override;
  MpiContext(const MpiContext&) = delete;
  MpiContext& operator=(const MpiContext&) = delete;

  const ProcessGroups& groups() const { return groups_; }

  // Advances pending collectives; returns how many are still incomplete.
  // Call it between kernels (see the file comment).
  size_t progress();
  // Collectives started and not yet waited on.
  size_t pending() const { return pending_.size(); }

  // For the kernels: registers a started collective under its future's name,
  // and hands it back (once) to the wait on that future.
  void start(const std::string& future, PendingCollective p);
  PendingCollective take(const std::string& future);

 private:
  ProcessGroups groups_;
  std::unordered_map<std::string, PendingCollective> pending_;
};

// Claims all_gather and broadcast of any dtype (bytes are moved as they
// are), reduce_scatter and all_reduce with op=sum of f32, f64, i64 and i32,
// and wait, for CPU tensors. Its kernels need an MpiContext and throw
// fsdpc::Error when a trace's `size` differs from its group's communicator.
const Executor& mpi_executor();

}  // namespace fsdpc
