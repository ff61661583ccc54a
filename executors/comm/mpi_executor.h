// The MPI executor ("mpi"): collectives of CPU tensors, started non-blocking
// on the communicator of their process group and completed by `wait`.
//
// Progress. Open MPI moves a non-blocking collective forward only while some
// MPI call runs on the rank: its libnbc schedules and its TCP transfers
// advance in opal_progress, and no thread of Open MPI's drives that for us.
// A collective started before a long stretch of compute would otherwise sit
// idle until its wait, and prefetching would overlap nothing. Two modes
// (FSDPC_MPI_PROGRESS, mpi_world.h):
// - poll (the default): MpiContext::progress() tests every pending request
//   between kernels (the runtime's progress hook), and `wait` is MPI_Wait.
//   On shared memory this costs nothing; over TCP nothing moves while one
//   kernel runs, beyond what the sockets' buffers took at the last test.
// - thread (FSDPC_MPI_PROGRESS=thread, or auto across nodes): as poll, and a
//   progress thread of the process runs Open MPI's progress engine (an
//   MPI_Iprobe that matches nothing) once the rank's thread has made no
//   progress call for 500 us, i.e. during a long kernel; between short
//   kernels it finds the rank's own tests recent and backs off (mpi_world.cpp
//   says how it sleeps). It never probes while the rank's thread sits in a
//   wait. The rank's thread still starts, tests and waits on every request
//   itself: a wait is the same as in poll mode, with no hand-over between
//   threads (a first version handed the requests to the thread and slept on
//   their completion; every wait then paid a wake-up of the other thread,
//   which on a loaded core cost milliseconds).
// Why poll is the default (docs/performance.md, "Across nodes"): on the 2-core
// development machine, with each emulated node's rank on its own core, the
// thread empties a wait that follows one long MPI-free kernel (25 MB at
// 1 Gbit/s behind 300 ms: 99 ms blocked polling, 0 with the thread), but in
// whole training steps the kernels are short enough that polling between
// them keeps TCP's socket buffers full, and the thread, sharing the rank's
// only core, cost as much as it hid. Where a node has a core to spare, or
// single kernels run longer than the transfers, use thread.
// Either way the trace's issue order, in-flight limits and `wait` placement
// are untouched; only when the bytes move changes.
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
#include <climits>
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
  // A recv is first matched to its message (MPI_Improbe, oldest recv first
  // per communicator and peer), then received whole (MPI_Imrecv): its size
  // is known before any byte lands, so a message of another size (the
  // traces' mistake) goes to `scratch` and its wait throws fsdpc::Error,
  // where a short buffer would have been an MPI error (MPI_ERR_TRUNCATE),
  // after which Open MPI's state cannot be trusted. Until matched, `request`
  // is MPI_REQUEST_NULL.
  bool receive = false;
  bool matched = false;
  MPI_Comm comm = MPI_COMM_NULL;
  int peer = -1;               // where it comes from, in comm
  int64_t message_bytes = -1;  // once matched
  // A send goes from `scratch`, a copy of its input, so its wait need not
  // block: the wait gives the value back and hands the send to the context
  // (MpiContext::detach), which completes it in the background. A pipeline
  // stage that waited for its send to be received could deadlock with the
  // next stage (1F1B: each would wait for the other's receive).
  bool buffered = false;
  uint64_t watch_id = 0;  // what the collective watch (mpi_world.h) calls it
  uint32_t timeline_id = UINT32_MAX;  // what the timeline calls it; MAX: not recorded
};

// Where a profiler (runtime/profiler.h, fsdpc train --profile) sees each
// collective from its issue to the moment this rank saw it complete: a test
// between kernels, or its wait. The executors layer cannot see the runtime,
// so it defines the interface, as it does CollectiveWatch.
class CollectiveTimeline {
 public:
  virtual ~CollectiveTimeline() = default;
  virtual uint32_t collective_issued(const CollectiveInfo& c) = 0;
  virtual void collective_completed(uint32_t id) = 0;
};

// What the MPI kernels need beyond their operands: the communicators and
// the requests between a collective and its wait.
class MpiContext : public KernelContext {
 public:
  // Collective over the world: see ProcessGroups.
  explicit MpiContext(const Mesh& mesh);
  explicit MpiContext(ProcessGroups groups);
  // Waits for collectives never waited on (complete_all()).
  ~MpiContext() override;
  MpiContext(const MpiContext&) = delete;
  MpiContext& operator=(const MpiContext&) = delete;

  const ProcessGroups& groups() const { return groups_; }
  // Fixed for the process by mpi_init() (FSDPC_MPI_PROGRESS).
  MpiProgress progress_mode() const { return mode_; }

  // Advances pending collectives, matching recvs to the messages that have
  // arrived (and, in thread mode, reports a failed MPI call of the progress
  // thread); returns how many are still incomplete. Call it between kernels
  // (see the file comment).
  size_t progress();
  // Collectives started and not yet waited on.
  size_t pending() const { return pending_.size(); }
  // Completes every collective never waited on (e.g. after an error unwound
  // the interpreter on every rank): MPI cannot cancel them, and they read and
  // write their buffers, so whoever owns those buffers calls this before
  // freeing them. Bounded by the collective watch's timeout like any wait.
  // A recv not yet matched to a message has nothing in MPI that could write
  // its buffer: it is dropped. A no-op once MPI is finalized.
  void complete_all();

  // For the kernels: registers a started collective under its future's name
  // (and with the collective watch, if one is installed), and hands it back
  // (once) to the wait on that future, a recv once it is matched (take()
  // blocks for that); complete() blocks until it is done, for at most the
  // watch's timeout.
  void start(const std::string& future, PendingCollective p, const CollectiveInfo& info);
  PendingCollective take(const std::string& future);
  void complete(PendingCollective& p);
  // A buffered send its wait has returned from: completed by progress() or
  // complete_all(), whichever sees it done first.
  void detach(PendingCollective p);
  // Buffered sends not yet completed.
  size_t sends_in_flight() const { return detached_.size(); }

  // Records every collective on `timeline` (not owned) until reset to null;
  // null, the default, costs one branch per collective.
  void set_timeline(CollectiveTimeline* timeline) { timeline_ = timeline; }

 private:
  ProcessGroups groups_;
  MpiProgress mode_ = MpiProgress::poll;
  CollectiveTimeline* timeline_ = nullptr;
  void completed(PendingCollective& p);  // tells the watch and the timeline
  // Matches unmatched recvs to the messages that have arrived, oldest first
  // per communicator and peer (MPI's non-overtaking order); never blocks.
  void match_arrived();
  // Blocks until the recv of `future`, and every older one from its peer, is matched.
  void match_through(const std::string& future);
  std::unordered_map<std::string, PendingCollective> pending_;
  std::vector<std::string> unmatched_;  // recvs by future, in start order
  std::vector<PendingCollective> detached_;  // buffered sends whose wait has returned
};

// Claims all_gather and broadcast of any dtype (bytes are moved as they
// are), reduce_scatter with op=sum and all_reduce with op=sum or op=max of
// f32, f64, i64, i32, bf16 and f16 (bf16 and f16 through MPI_Ops of ours,
// rounded at each pairwise combination in an order mpi_reduce_ops.h gives),
// send and recv of any dtype (bytes to or from rank `peer` of the group's
// communicator under one tag of their own, so MPI's non-overtaking rule
// matches them in program order per pair of ranks: MPI_Isend, and a matched
// probe and MPI_Imrecv, see PendingCollective), and wait, for CPU tensors.
// Its kernels need an MpiContext and throw fsdpc::Error when a trace's
// `size` differs from its group's communicator; a wait on a recv throws
// when its message's byte count differs from the recv's type.
const Executor& mpi_executor();

}  // namespace fsdpc
