// The NCCL executor ("nccl"): collectives of tensors on a CUDA device, issued
// on the communication stream with the communicator of their process group
// and completed by `wait`. The GPU counterpart of the MPI executor
// (executors/comm/mpi_executor.h).
//
// Streams. A collective first makes the comm stream wait for everything
// given to the compute stream so far (its input was produced there: one
// event recorded on compute, waited on by comm), issues its NCCL call on the
// comm stream, and records its own event there. `wait` makes the compute
// stream wait for that event and, when its output is not the future's
// buffer, copies on the compute stream. The host never synchronises inside a
// collective or a wait; NCCL progresses on the device by itself, so unlike
// MPI nothing needs calling between kernels.
//
// Buffers (the runtime's side of the contract). The runtime allocates every
// output before the kernel runs, as for compute kernels. A collective reads
// its input and writes its future's buffer until the matching `wait`, so
// both must stay alive until then (passes/del.cpp frees a collective's input
// after its wait). Work the runtime puts on the compute stream after the
// wait, reuse of a freed input's memory included, is ordered after the
// collective; the host or another stream touching that memory needs the
// step's synchronize_with_timeout() first. `wait` may be given the future's
// own buffer as its output (no copy) or another one (copied).
//
// Failures. An error NCCL reports asynchronously (a peer gone, a network
// error) and a collective that never finishes must end the job on every
// rank, not hang it: the runtime calls synchronize_with_timeout() at the end
// of each step, and every other host wait (a host copy, the clipping norm,
// a free) is NcclContext::wait_idle(): each checks the communicators
// between polls of the streams and, on an error or past the timeout, aborts
// the communicators first (before anything could synchronise the device)
// and then the process, naming the collectives still running. Teardown
// (quiesce()) aborts them instead of waiting when collectives were never
// waited on or an exception unwinds.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "executors/comm/mpi_world.h"
#include "executors/comm/nccl_world.h"
#include "executors/cuda/cuda_context.h"
#include "executors/executor.h"
#include "executors/rank_device.h"  // CollectiveTime

namespace fsdpc {

// The NCCL type that sums `d`: f32, bf16, f16, f64, i32 and i64; nullopt
// for bool (gathered and broadcast as bytes, never summed).
std::optional<ncclDataType_t> nccl_dtype(DType d);

// A collective issued on the comm stream, keyed by its future's name until
// its wait.
struct NcclPending {
  cudaEvent_t done = nullptr;  // recorded on the comm stream after the call
  // With timing on: recorded on the comm stream once it may start the call
  // (after earlier collectives and the compute stream's event).
  cudaEvent_t started = nullptr;
  std::string kind;  // "all_gather", ...: what the time is booked under
  void* result = nullptr;      // the future's buffer
  int64_t bytes = 0;           // of the result
  // A gather along dim > 0 lands here (CudaContext::scratch(), dropped at
  // wait) as one block per member and is interleaved into the wait's output
  // (nccl_staging.h).
  std::shared_ptr<void> scratch;
  // A reduce-scatter along dim > 0 sends from here: read on the comm stream
  // until the collective completes, so held until its wait.
  std::shared_ptr<void> send_staging;
  int64_t outer = 0;        // gather: rows before `dim` (0: no interleave)
  int64_t inner_bytes = 0;  // gather: bytes of one member's piece of a row
  int members = 0;
  std::string what;  // "all_gather(t_0_weight, group=dp) -> ft0": for messages
};


// What the NCCL kernels need beyond their operands: the CUDA context (device
// and streams), the communicators, and the collectives between issue and wait.
class NcclContext : public cuda::CudaContext {
 public:
  // Collective over the world: see ProcessGroups and NcclWorld. Reads the
  // timeout from nccl_timeout_from_env() (--timeout, FSDPC_TIMEOUT_S or
  // FSDPC_NCCL_TIMEOUT_S; default 600 s).
  explicit NcclContext(const Mesh& mesh, const cuda::CudaOptions& options = {});
  explicit NcclContext(ProcessGroups groups, const cuda::CudaOptions& options = {});
  // A clean exit drains both streams (within the timeout) and destroys the
  // communicators; with collectives never waited on, an exception in flight,
  // an error or a timeout it aborts them instead, which stops their kernels
  // without the peers. The runtime must destroy the context before the
  // buffers of collectives in flight.
  ~NcclContext() override;

  const ProcessGroups& groups() const { return groups_; }
  const NcclWorld& world() const { return world_; }
  // Collectives issued and not yet waited on.
  size_t pending() const { return pending_.size(); }
  // FSDPC_NCCL_TIMING=1: each collective is timed on the device by a pair of
  // events (timing events cost a little more than the default ones, so it
  // is off unless asked for; bench/gpu asks).
  bool timing() const { return timing_; }
  // The times of the collectives completed since the last call, by kind;
  // call after synchronize_with_timeout(). Empty when timing is off.
  std::vector<CollectiveTime> take_times();

  // Asks every communicator for an asynchronous error; on one, aborts the
  // communicators and the process with NCCL's message.
  void check_async_errors();
  // Blocks the host until both streams are idle, polling them and checking
  // the communicators in between; aborts with the collectives still running
  // when `seconds` pass first. The end of a step, reading a loss, tests.
  void synchronize_with_timeout(double seconds);
  void synchronize_with_timeout() { synchronize_with_timeout(timeout_s_); }
  // The host waits of CudaContext under the watchdog (see the top).
  void wait_idle(Streams which, const char* what) override;
  // Drains within the timeout, or aborts the communicators (collectives
  // never waited on, an exception unwinding, an error, the timeout). Once
  // per batch of work: issuing a collective arms it again.
  void quiesce() noexcept override;
  // Detaching (nullptr) quiesces and drops the staging of collectives never
  // waited on, which belongs to the pool.
  void use_scratch_pool(ScratchPool* pool) override;

  // For the kernels. Makes the comm stream wait for the compute stream.
  void comm_after_compute();
  // An event from the pool (created on demand, reused after completion).
  cudaEvent_t acquire_event();
  // Registers an issued collective under its future's name.
  void start(const std::string& future, NcclPending p);
  // Hands the collective of `future` back (once) after making the compute
  // stream wait for it; its event returns to the pool once complete.
  NcclPending join(const std::string& future);

 private:
  enum class Drain { idle, error, timeout };
  // Polls `which` streams until idle, an async error (described in `why`) or
  // the timeout; never aborts. `what`: what the host waits for.
  Drain drain(Streams which, double seconds, const char* what, std::string& why);
  // The first communicator's asynchronous error as a message; empty if none.
  std::string async_error() const;
  // Pending and joined collectives whose events have not completed.
  std::string running_collectives();
  void recycle_completed();
  [[noreturn]] void abort_with(const std::string& why);

  struct Joined {
    std::string what;
    cudaEvent_t done = nullptr;
    cudaEvent_t started = nullptr;
    std::string kind;
    int64_t bytes = 0;
  };

  double timeout_s_;
  bool timing_;
  bool quiesced_ = false;
  std::vector<CollectiveTime> times_;
  ProcessGroups groups_;
  NcclWorld world_;
  cudaEvent_t compute_ready_ = nullptr;
  std::vector<cudaEvent_t> free_events_;
  std::vector<Joined> joined_;  // waited on, event maybe still pending
  std::unordered_map<std::string, NcclPending> pending_;
};

// The collective timeout, collective_timeout() (mpi_world.h): fsdpc train
// --timeout, else FSDPC_TIMEOUT_S, else FSDPC_NCCL_TIMEOUT_S, else 600 s;
// throws fsdpc::Error when a variable is not a positive number.
double nccl_timeout_from_env();

// Claims all_gather, broadcast, send and recv of f32, bf16, f16, f64, i32,
// i64 and bool (bytes are moved as they are), reduce_scatter and all_reduce
// with op=sum of all but bool, and wait, for tensors on a CUDA device. claims() looks at
// types only (no device needed). Kernels need an NcclContext and throw
// fsdpc::Error when a trace's `size` differs from its group's communicator.
const Executor& nccl_executor();

}  // namespace fsdpc
