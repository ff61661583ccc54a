// The MPI executor's kernels and MpiContext: each collective starts one
// non-blocking MPI call on its group's communicator; `wait` completes it.
// send is an MPI_Isend; a recv is matched to its message before it is
// received (PendingCollective says why).
#include "executors/comm/mpi_executor.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <utility>

#include "executors/comm/collective_executor.h"
#include "executors/comm/mpi_check.h"
#include "executors/comm/mpi_reduce_ops.h"
#include "ir/error.h"

namespace fsdpc {

// Messages of send and recv use this tag and no other op sends any, so within
// one communicator MPI's non-overtaking rule matches them in program order
// per ordered pair of ranks, as the reference's Mailbox does.
constexpr int kPointToPointTag = 7001;

// ---- MpiContext ------------------------------------------------------------

MpiContext::MpiContext(const Mesh& mesh) : groups_(mesh), mode_(mpi_progress()) {}

MpiContext::MpiContext(ProcessGroups groups) : groups_(std::move(groups)), mode_(mpi_progress()) {}

MpiContext::~MpiContext() { complete_all(); }

void MpiContext::complete_all() {
  int finalized = 0;
  FSDPC_MPI_CHECK(MPI_Finalized(&finalized));
  if (finalized) return;  // a context left to static destruction: MPI is gone
  for (const std::string& name : unmatched_) {
    PendingCollective& p = pending_.at(name);
    if (mode_ == MpiProgress::thread) mpi_progress_completed();
    completed(p);
    pending_.erase(name);
  }
  unmatched_.clear();
  for (auto& [name, p] : pending_)
    if (!p.complete) complete(p);
  for (PendingCollective& p : detached_) complete(p);
  detached_.clear();
}

void MpiContext::detach(PendingCollective p) {
  FSDPC_CHECK(p.buffered) << "only a buffered send completes after its wait";
  if (!p.complete) detached_.push_back(std::move(p));
}

void MpiContext::complete(PendingCollective& p) {
  if (p.complete) return;  // progress() saw it finish (and told the watch)
  FSDPC_CHECK(!p.receive || p.matched) << "a recv completed before it was matched to its message";
  mpi_wait_watched(&p.request, p.watch_id);
  if (mode_ == MpiProgress::thread) {
    mpi_progress_check();
    mpi_progress_completed();
  }
  completed(p);
}

void MpiContext::completed(PendingCollective& p) {
  p.complete = true;
  if (CollectiveWatch* w = collective_watch()) w->completed(p.watch_id);
  if (timeline_ && p.timeline_id != UINT32_MAX) timeline_->collective_completed(p.timeline_id);
}

size_t MpiContext::progress() {
  if (mode_ == MpiProgress::thread) mpi_progress_check();
  if (!unmatched_.empty()) match_arrived();
  size_t open = 0;
  for (auto& [name, p] : pending_) {
    if (p.complete) continue;
    if (p.receive && !p.matched) {  // no request yet: MPI_Test would call it done
      ++open;
      continue;
    }
    int done = 0;
    FSDPC_MPI_CHECK(MPI_Test(&p.request, &done, MPI_STATUS_IGNORE));
    if (done) {
      // MPI_Test set the request to MPI_REQUEST_NULL
      if (mode_ == MpiProgress::thread) mpi_progress_completed();
      completed(p);
    } else {
      ++open;
    }
  }
  for (auto it = detached_.begin(); it != detached_.end();) {
    int done = 0;
    FSDPC_MPI_CHECK(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE));
    if (!done) {
      ++open;
      ++it;
      continue;
    }
    if (mode_ == MpiProgress::thread) mpi_progress_completed();
    completed(*it);
    it = detached_.erase(it);
  }
  if (mode_ == MpiProgress::thread && open > 0) mpi_progress_polled();
  return open;
}

namespace {

// Receives the message a probe matched, whole: into the recv's future when
// it has the recv's bytes, else into scratch for the wait to report.
void receive_matched(PendingCollective& p, MPI_Message& message, const MPI_Status& status) {
  int count = 0;
  FSDPC_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &count));
  p.matched = true;
  p.message_bytes = count;
  void* into = p.result;
  if (count != p.bytes) {
    p.scratch.resize(static_cast<size_t>(count));
    into = p.scratch.data();
  }
  FSDPC_MPI_CHECK(MPI_Imrecv(into, count, MPI_BYTE, &message, &p.request));
}

}  // namespace

void MpiContext::match_arrived() {
  std::vector<std::pair<MPI_Comm, int>> stalled;  // pairs whose oldest recv found nothing
  for (auto it = unmatched_.begin(); it != unmatched_.end();) {
    PendingCollective& p = pending_.at(*it);
    const std::pair<MPI_Comm, int> from{p.comm, p.peer};
    if (std::find(stalled.begin(), stalled.end(), from) != stalled.end()) {
      ++it;
      continue;
    }
    int found = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    FSDPC_MPI_CHECK(MPI_Improbe(p.peer, kPointToPointTag, p.comm, &found, &message, &status));
    if (!found) {
      stalled.push_back(from);
      ++it;
      continue;
    }
    receive_matched(p, message, status);
    it = unmatched_.erase(it);
  }
}

void MpiContext::match_through(const std::string& future) {
  const PendingCollective& target = pending_.at(future);
  while (!target.matched) {
    auto oldest = std::find_if(unmatched_.begin(), unmatched_.end(), [&](const std::string& name) {
      const PendingCollective& p = pending_.at(name);
      return p.comm == target.comm && p.peer == target.peer;
    });
    FSDPC_CHECK(oldest != unmatched_.end()) << "recv " << future << " is neither matched nor waiting for a message";
    PendingCollective& p = pending_.at(*oldest);
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    mpi_mprobe_watched(p.peer, kPointToPointTag, p.comm, &message, &status, p.watch_id);
    receive_matched(p, message, status);
    unmatched_.erase(oldest);
  }
}

void MpiContext::start(const std::string& future, PendingCollective p, const CollectiveInfo& info) {
  if (CollectiveWatch* w = collective_watch()) p.watch_id = w->issued(info);
  if (timeline_) p.timeline_id = timeline_->collective_issued(info);
  const bool receive = p.receive;
  auto [it, inserted] = pending_.emplace(future, std::move(p));
  FSDPC_CHECK(inserted) << "collective " << future << " started twice without a wait";
  if (mode_ == MpiProgress::thread) mpi_progress_started();
  if (receive) {
    unmatched_.push_back(future);
    match_arrived();  // receives at once what has arrived already
  }
}

PendingCollective MpiContext::take(const std::string& future) {
  auto it = pending_.find(future);
  FSDPC_CHECK(it != pending_.end()) << "wait on " << future << ", which no MPI collective started";
  if (it->second.receive && !it->second.matched) match_through(future);
  PendingCollective p = std::move(it->second);
  pending_.erase(it);
  return p;
}

namespace {

// ---- Shared by the kernels -------------------------------------------------

MpiContext& mpi_context(KernelContext& ctx) {
  auto* mpi = dynamic_cast<MpiContext*>(&ctx);
  FSDPC_CHECK(mpi != nullptr) << "an MPI kernel was run without an MpiContext";
  return *mpi;
}

// The MPI type of `d`; dtypes MPI cannot add move as same-sized integers
// (bf16 and f16 as MPI_UINT16_T, which their MPI_Ops expect).
MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i64: return MPI_INT64_T;
    case DType::i32: return MPI_INT32_T;
    case DType::i8: return MPI_INT8_T;
    default: break;
  }
  return dtype_size(d) == 2 ? MPI_UINT16_T : MPI_UINT8_T;
}

// One collective's operands, checked, and where this rank stands in its group.
struct Call {
  const TensorType* in = nullptr;
  const TensorType* out = nullptr;
  void* in_data = nullptr;
  void* out_data = nullptr;
  MPI_Comm comm = MPI_COMM_NULL;
  int size = 0;
  int me = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  int64_t elem = 0;  // bytes per element
  // A reduction's: MPI_SUM or MPI_MAX, or a bf16/f16 op (mpi_reduce_ops.h).
  MpiReduction reduction = MpiReduction::sum;
  MPI_Op op = MPI_OP_NULL;
};

std::string where(const BoundSymbol& b) {
  return std::string(op_name(b.op)) + " -> " + b.output().name;
}

// MPI counts are ints; a larger message needs splitting (bucketing does).
int mpi_count(const BoundSymbol& b, int64_t n) {
  if (n > INT_MAX)
    fail(where(b), ": ", n, " elements exceed what one MPI call can move (", INT_MAX, ")");
  return static_cast<int>(n);
}

// The number of ranks in `b`'s group, which must be the trace's `size`: a
// trace compiled for another world would compute silently wrong shapes.
int checked_group_size(const BoundSymbol& b, const ProcessGroups& groups) {
  const std::string& group = b.attrs.get_str("group");
  const int actual = groups.size(group);
  const int64_t size = b.attrs.get_int("size");
  if (size != actual)
    fail(where(b), ": group '", group, "' has ", actual, " ranks on the ", mesh_description(groups.mesh()),
         " of this MPI job, but the trace says size=", size);
  return actual;
}

Call prepare(KernelContext& kctx, const BoundSymbol& b, const std::vector<TensorView>& in,
             const std::vector<TensorView>& out) {
  FSDPC_CHECK(in.size() == 1 && out.size() == 1 && in[0].type && out[0].type)
      << where(b) << ": expected one input and one output view";
  const ProcessGroups& groups = mpi_context(kctx).groups();
  Call c;
  c.in = in[0].type;
  c.out = out[0].type;
  c.in_data = in[0].data;
  c.out_data = out[0].data;
  const std::string& group = b.attrs.get_str("group");
  c.comm = groups.comm(group);
  c.size = checked_group_size(b, groups);
  c.me = groups.rank_in(group);
  const DType d = c.in->dtype;
  if (b.op == OpId::AllReduce || b.op == OpId::ReduceScatter) {
    // Checked before any MPI call: every rank runs the same trace and throws
    // here together, so none is left waiting in the collective.
    const std::string op = b.attrs.has("op") ? b.attrs.get_str("op") : std::string("(none)");
    if (op == "sum") {
      c.reduction = MpiReduction::sum;
    } else if (op == "max" && b.op == OpId::AllReduce) {
      c.reduction = MpiReduction::max;
    } else {
      fail(where(b), ": op=", op, " on ", type_str(*c.in), "; the MPI executor ",
           b.op == OpId::AllReduce ? "all-reduces with op=sum or op=max" : "reduce-scatters with op=sum");
    }
    if (!mpi_reduces(d))
      fail(where(b), ": MPI cannot reduce ", dtype_name(d), " (input ", type_str(*c.in),
           "); the MPI executor reduces ", mpi_reducible_dtypes());
    c.op = mpi_reduce_op(d, c.reduction);
  }
  c.type = mpi_type(d);
  c.elem = dtype_size(d);
  FSDPC_CHECK((c.in_data || numel(c.in->shape) == 0) && (c.out_data || numel(c.out->shape) == 0))
      << where(b) << ": a tensor without a buffer";
  return c;
}

int64_t prod(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

std::byte* bytes(void* p) { return static_cast<std::byte*>(p); }

PendingCollective pending_for(const Call& c) {
  PendingCollective p;
  p.result = c.out_data;
  p.bytes = numel(c.out->shape) * c.elem;
  return p;
}

// Registers a started collective with the context (and the watch); a recv
// has no input to name.
void started(KernelContext& kctx, const BoundSymbol& b, MPI_Comm comm, DType dtype, PendingCollective p,
             int64_t count) {
  const std::string_view input = b.inputs.empty() ? std::string_view() : std::string_view(b.inputs[0].name);
  const CollectiveInfo info{op_name(b.op), b.output().name, input, b.attrs.get_str("group"),
                            comm,          count,           dtype_name(dtype), p.bytes};
  mpi_context(kctx).start(b.output().name, std::move(p), info);
}

void started(KernelContext& kctx, const BoundSymbol& b, const Call& c, PendingCollective p, int count) {
  started(kctx, b, c.comm, c.in->dtype, std::move(p), count);
}

// ---- Kernels ---------------------------------------------------------------

// A group of one rank: every collective is the identity, so it is a copy
// made here, registered like any other so its wait, the watchdog and the
// flight recorder see it. MPI would copy too, and Open MPI's non-blocking
// reduce_scatter first copied into a temporary it freed again: at world
// size 1 that was a fresh page fault on every gradient byte of every step.
bool copied_locally(KernelContext& kctx, const BoundSymbol& b, const Call& c) {
  if (c.size != 1) return false;
  PendingCollective p = pending_for(c);
  FSDPC_CHECK(numel(c.in->shape) * c.elem == p.bytes) << where(b) << ": a group of one changes no shape";
  if (c.in_data != c.out_data && p.bytes > 0) std::memcpy(c.out_data, c.in_data, static_cast<size_t>(p.bytes));
  started(kctx, b, c, std::move(p), mpi_count(b, numel(c.in->shape)));
  return true;
}

// Members' inputs side by side along `dim`. Along dim 0 (what traces gather)
// that is their concatenation, gathered straight into the future; along a
// later dim the blocks land in scratch and are interleaved at wait.
void all_gather(KernelContext& kctx, const BoundSymbol& b, const std::vector<TensorView>& in,
                const std::vector<TensorView>& out) {
  Call c = prepare(kctx, b, in, out);
  if (copied_locally(kctx, b, c)) return;
  const size_t dim = static_cast<size_t>(b.attrs.get_int("dim"));
  const Shape& xs = c.in->shape;
  FSDPC_CHECK(dim < xs.size() && numel(c.out->shape) == numel(xs) * c.size) << where(b);
  PendingCollective p = pending_for(c);
  void* recv = c.out_data;
  if (prod(xs, 0, dim) > 1) {
    p.scratch.resize(p.bytes);
    recv = p.scratch.data();
    p.outer = prod(xs, 0, dim);
    p.inner_bytes = prod(xs, dim, xs.size()) * c.elem;
    p.members = c.size;
  }
  const int count = mpi_count(b, numel(xs));
  const bool in_place = c.in_data == bytes(recv) + c.me * numel(xs) * c.elem && count > 0;
  FSDPC_MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : c.in_data, count, c.type, recv, count,
                                 c.type, c.comm, &p.request));
  started(kctx, b, c, std::move(p), count);
}

// The sum, of which member `me` keeps the me-th chunk along `dim`. MPI
// scatters contiguous blocks, so along a later dim the input is first
// reordered to put each member's chunk in one block.
void reduce_scatter(KernelContext& kctx, const BoundSymbol& b, const std::vector<TensorView>& in,
                    const std::vector<TensorView>& out) {
  Call c = prepare(kctx, b, in, out);
  if (copied_locally(kctx, b, c)) return;
  const size_t dim = static_cast<size_t>(b.attrs.get_int("dim"));
  const Shape& xs = c.in->shape;
  FSDPC_CHECK(dim < xs.size() && numel(c.out->shape) * c.size == numel(xs)) << where(b);
  FSDPC_CHECK(c.in_data != c.out_data || numel(xs) == 0 || c.size == 1)
      << where(b) << ": the output may not alias the input";
  PendingCollective p = pending_for(c);
  const void* send = c.in_data;
  const int64_t outer = prod(xs, 0, dim);
  if (outer > 1 && c.size > 1) {
    const int64_t chunk = p.bytes / outer;  // one member's bytes of one outer row
    p.scratch.resize(numel(xs) * c.elem);
    for (int64_t o = 0; o < outer; ++o)
      for (int m = 0; m < c.size; ++m)
        std::memcpy(p.scratch.data() + (m * outer + o) * chunk,
                    bytes(c.in_data) + (o * c.size + m) * chunk, chunk);
    send = p.scratch.data();
  }
  const int count = mpi_count(b, numel(c.out->shape));
  if (c.in_data == c.out_data) send = MPI_IN_PLACE;  // size 1: the sum is the input
  FSDPC_MPI_CHECK(MPI_Ireduce_scatter_block(send, c.out_data, count, c.type, c.op, c.comm, &p.request));
  started(kctx, b, c, std::move(p), count);
}

void all_reduce(KernelContext& kctx, const BoundSymbol& b, const std::vector<TensorView>& in,
                const std::vector<TensorView>& out) {
  Call c = prepare(kctx, b, in, out);
  if (copied_locally(kctx, b, c)) return;
  FSDPC_CHECK(c.out->shape == c.in->shape) << where(b);
  PendingCollective p = pending_for(c);
  const int count = mpi_count(b, numel(c.in->shape));
  const void* send = c.in_data == c.out_data ? MPI_IN_PLACE : c.in_data;
  FSDPC_MPI_CHECK(MPI_Iallreduce(send, c.out_data, count, c.type, c.op, c.comm, &p.request));
  started(kctx, b, c, std::move(p), count);
}

// This rank's place in the group: known locally, nothing is sent.
void axis_index(KernelContext& kctx, const BoundSymbol& b, const std::vector<TensorView>& in,
                const std::vector<TensorView>& out) {
  FSDPC_CHECK(in.empty() && out.size() == 1 && out[0].data) << where(b) << ": expected one output";
  const ProcessGroups& groups = mpi_context(kctx).groups();
  checked_group_size(b, groups);
  *static_cast<int64_t*>(out[0].data) = groups.rank_in(b.attrs.get_str("group"));
}

// The root's input, everywhere. MPI broadcasts within one buffer, so the
// root first copies its input into the future.
void broadcast(KernelContext& kctx, const BoundSymbol& b, const std::vector<TensorView>& in,
               const std::vector<TensorView>& out) {
  Call c = prepare(kctx, b, in, out);
  FSDPC_CHECK(c.out->shape == c.in->shape) << where(b);
  const int64_t root = b.attrs.get_int("root");
  if (root < 0 || root >= c.size)
    fail(where(b), ": root ", root, " is outside a group of ", c.size, " ranks");
  if (copied_locally(kctx, b, c)) return;
  PendingCollective p = pending_for(c);
  if (c.me == root && c.in_data != c.out_data && p.bytes > 0)
    std::memcpy(c.out_data, c.in_data, p.bytes);
  const int count = mpi_count(b, numel(c.in->shape));
  FSDPC_MPI_CHECK(MPI_Ibcast(c.out_data, count, c.type, static_cast<int>(root), c.comm, &p.request));
  started(kctx, b, c, std::move(p), count);
}

// ---- Point to point ----------------------------------------------------------

// A send's or recv's communicator, its peer's rank there, and the message's
// bytes (moved as MPI_BYTE: a matching recv must agree on the byte count,
// which the wait checks, and not on an MPI datatype).
struct Message {
  MPI_Comm comm = MPI_COMM_NULL;
  int peer = 0;
  int bytes = 0;
};

Message message(KernelContext& kctx, const BoundSymbol& b, const TensorType& t) {
  const ProcessGroups& groups = mpi_context(kctx).groups();
  const std::string& group = b.attrs.get_str("group");
  const int size = checked_group_size(b, groups);
  const int64_t peer = b.attrs.get_int("peer");
  if (peer < 0 || peer >= size) fail(where(b), ": peer ", peer, " is outside group '", group, "' of ", size, " ranks");
  if (peer == groups.rank_in(group))
    fail(where(b), ": peer ", peer, " is this rank's own position in group '", group, "'; a message goes to another rank");
  const int64_t bytes = numel(t.shape) * dtype_size(t.dtype);
  if (bytes > INT_MAX)
    fail(where(b), ": ", bytes, " bytes (", type_str(t), ") exceed what one MPI message can move (", INT_MAX, ")");
  return Message{groups.comm(group), static_cast<int>(peer), static_cast<int>(bytes)};
}

// The input goes to `peer` from a copy the pending send owns (the sender
// keeps its value: the wait gives the copy back), so the input is free
// after the start and the wait need not block (PendingCollective::buffered).
void send_to_peer(KernelContext& kctx, const BoundSymbol& b, const std::vector<TensorView>& in,
                  const std::vector<TensorView>& out) {
  FSDPC_CHECK(in.size() == 1 && out.size() == 1 && in[0].type && out[0].type)
      << where(b) << ": expected one input and one output view";
  const Message m = message(kctx, b, *in[0].type);
  PendingCollective p;
  p.result = out[0].data;
  p.bytes = m.bytes;
  p.buffered = true;
  FSDPC_CHECK(numel(out[0].type->shape) * dtype_size(out[0].type->dtype) == p.bytes) << where(b);
  p.scratch.resize(static_cast<size_t>(p.bytes));
  if (p.bytes > 0) std::memcpy(p.scratch.data(), in[0].data, static_cast<size_t>(p.bytes));
  FSDPC_MPI_CHECK(MPI_Isend(p.scratch.data(), m.bytes, MPI_BYTE, m.peer, kPointToPointTag, m.comm, &p.request));
  started(kctx, b, m.comm, in[0].type->dtype, std::move(p), numel(in[0].type->shape));
}

// The oldest message from `peer` not yet received, into the future: the
// context matches it (now, if it has arrived; else between kernels or at
// the wait) and receives it whole; the wait checks its size.
void recv_from_peer(KernelContext& kctx, const BoundSymbol& b, const std::vector<TensorView>& in,
                    const std::vector<TensorView>& out) {
  FSDPC_CHECK(in.empty() && out.size() == 1 && out[0].type) << where(b) << ": expected one output view";
  const TensorType& t = *out[0].type;
  const Message m = message(kctx, b, t);
  FSDPC_CHECK(out[0].data || m.bytes == 0) << where(b) << ": a tensor without a buffer";
  PendingCollective p;
  p.result = out[0].data;
  p.bytes = m.bytes;
  p.receive = true;
  p.comm = m.comm;
  p.peer = m.peer;
  started(kctx, b, m.comm, t.dtype, std::move(p), numel(t.shape));
}

// A recv's message must have carried exactly its type's bytes: a send of
// another type is a mistake of the traces, which MPI would not notice.
void check_received(const BoundSymbol& wait, const PendingCollective& p, const TensorType& type) {
  if (!p.receive || p.message_bytes == p.bytes) return;
  fail("recv ", wait.inputs.at(0).name, " (waited by ", wait.output().name, "): the message from peer ", p.peer,
       " has ", p.message_bytes, " bytes, but the recv expects ", p.bytes, " (", type_str(type),
       "); the matching send's input has another type");
}

// Completes the collective that produced the future and puts its value into
// the wait's output: interleaved from scratch for a gather along dim > 0,
// copied when the output is not the future's buffer.
void wait_collective(KernelContext& kctx, const BoundSymbol& b, const std::vector<TensorView>& in,
          const std::vector<TensorView>& out) {
  FSDPC_CHECK(in.size() == 1 && out.size() == 1 && out[0].type) << where(b);
  MpiContext& mpi = mpi_context(kctx);
  PendingCollective p = mpi.take(b.inputs.at(0).name);
  if (p.buffered) {  // a send: its value back now, its completion in the background
    FSDPC_CHECK(numel(out[0].type->shape) * dtype_size(out[0].type->dtype) == p.bytes) << where(b);
    if (p.bytes > 0) std::memcpy(out[0].data, p.scratch.data(), static_cast<size_t>(p.bytes));
    mpi.detach(std::move(p));
    return;
  }
  mpi.complete(p);
  check_received(b, p, *out[0].type);
  FSDPC_CHECK(numel(out[0].type->shape) * dtype_size(out[0].type->dtype) == p.bytes)
      << where(b) << ": output of " << type_str(*out[0].type) << " for " << p.bytes << " bytes";
  if (p.outer > 0 && p.bytes > 0) {
    // scratch is [member][outer][inner]; the result is [outer][member][inner].
    for (int64_t o = 0; o < p.outer; ++o)
      for (int m = 0; m < p.members; ++m)
        std::memcpy(bytes(out[0].data) + (o * p.members + m) * p.inner_bytes,
                    p.scratch.data() + (m * p.outer + o) * p.inner_bytes, p.inner_bytes);
  } else if (out[0].data != p.result && p.bytes > 0) {
    std::memcpy(out[0].data, p.result, p.bytes);
  }
}

// ---- The executor ----------------------------------------------------------

bool moves_any(DType) { return true; }

}  // namespace

const Executor& mpi_executor() {
  static const CollectiveExecutor executor(CollectiveBackend{
      "mpi", DeviceKind::cpu,
      {{OpId::AllGather, all_gather},
       {OpId::ReduceScatter, reduce_scatter},
       {OpId::AllReduce, all_reduce},
       {OpId::Broadcast, broadcast},
       {OpId::Wait, wait_collective},
       {OpId::AxisIndex, axis_index},
       {OpId::Send, send_to_peer},
       {OpId::Recv, recv_from_peer}},
      moves_any, mpi_reduces});
  return executor;
}

}  // namespace fsdpc
