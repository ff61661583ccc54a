// The stream plan: how a claimed CUDA execution trace runs on two streams.
//
// Compute kernels run on the compute stream in trace order. Each NCCL
// collective runs on the communication stream: when it is issued, the comm
// stream first waits for everything issued to compute so far (its input was
// produced there), and the collective's future is an event recorded on the
// comm stream after it. `wait` makes the compute stream wait for that event;
// the host never blocks. So prefetched all_gathers and reduce_scatters run
// while the compute stream works on earlier layers.
//
// Buffers. The runtime frees a buffer when `del` names it, in host order,
// into a caching allocator that hands blocks out again in host order. That
// is safe for the compute stream by program order, and for the comm stream
// because each collective first waits for compute. It is unsafe in one case
// only: freeing a buffer a collective still reads or writes, before the
// compute stream has waited for that collective. plan_streams moves such a
// `del` to just after the collective's wait, so no buffer is ever handed out
// while a stream may still touch it, and no per-stream bookkeeping
// (PyTorch's recordStream) grows without bound. passes/del.cpp already
// places collective buffers' dels after their waits; the plan makes the
// guarantee independent of it.
//
// Pre:  a claimed trace (executors/claim.h) whose collectives and waits are
//       claimed by "nccl".
// Post: every nccl collective has the attribute stream=comm and every nccl
//       wait stream=compute (printed, so goldens pin the structure); no del
//       of a collective's input or future precedes that collective's wait.
//
//   ft1 = nccl_all_gather(t_0_weight, group=dp, size=2, dim=0, stream=comm)
//   t2 = cuda_tanh(x)                # overlaps with the all_gather
//   t3 = nccl_wait(ft1, stream=compute)
#pragma once

#include <string>
#include <vector>

#include "ir/trace.h"

namespace fsdpc::cuda {

// By value: pass an rvalue and the statements move instead of being copied.
Trace plan_streams(Trace claimed);

// The stream a statement of a planned trace runs on.
enum class StreamKind { compute, comm, host };  // host: del (the runtime)
StreamKind stream_of(const BoundSymbol& b);

}  // namespace fsdpc::cuda
