// What one rank's execution traces run with: the context every kernel and
// collective is given, the device backend (memory, host copies, the step's
// flat-array loops), and the two points where the runtime hands control to
// the device. The engine is written once against this; the Target picks
// the implementation:
//  - cpu:  the MPI context (communicators, pending requests) and host memory;
//          progress() polls MPI between kernels (mpi_executor.h).
//  - cuda: the NCCL context (device, compute and comm streams, cuBLASLt,
//          communicators) and device memory; end_step() waits for both
//          streams, surfacing NCCL errors and timeouts on every rank.
#pragma once

#include <memory>
#include <cstdint>
#include <string>
#include <vector>

#include "executors/device_backend.h"
#include "executors/executor.h"
#include "ir/target.h"

namespace fsdpc {

class MpiContext;

// Device time of the collectives of one kind (all_gather, reduce_scatter,
// all_reduce, broadcast) over some span, measured by events on the stream
// that ran them.
struct CollectiveTime {
  std::string kind;
  int64_t count = 0;
  int64_t bytes = 0;  // of their results
  double ms = 0;
};

class RankDevice {
 public:
  virtual ~RankDevice() = default;
  virtual KernelContext& kernels() = 0;
  virtual DeviceBackend& backend() = 0;
  // Between two statements of a trace.
  virtual void progress() {}
  // After a step's traces were issued, before the host reads what they made.
  virtual void end_step() {}
  // The collectives completed since the last call, by kind; after end_step().
  // Empty where they are not timed (MPI's progress is polled on the host; on
  // cuda, FSDPC_NCCL_TIMING=1 turns the timing events on).
  virtual std::vector<CollectiveTime> take_collective_times() { return {}; }
};

// The rank's device for `target`.
// `mpi` carries the communicators of the mesh and outlives the result. For
// cuda, the rank takes the GPU of its local rank on the node, or device 0
// when it sees only one (a launcher bound one GPU to each rank), and builds
// its NCCL communicators: collective over the world (select_device in
// executors/cuda/device.h). Throws fsdpc::Error when cuda is asked for and
// no device is visible.
std::unique_ptr<RankDevice> open_rank_device(Target target, MpiContext& mpi);

}  // namespace fsdpc
