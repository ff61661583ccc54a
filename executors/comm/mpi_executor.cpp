// The MPI executor's kernels and MpiContext: each collective starts one
// non-blocking MPI call on its group's communicator; `wait` completes it.
#include "executors/comm/mpi_executor.h"

#include <climits>
#include <cstring>
#include <utility>

#include "executors/comm/mpi_check.h"
#include "ir/error.h"

namespace fsdpc {

// ---- MpiContext ------------------------------------------------------------

MpiContext::MpiContext(const Mesh& mesh) : groups_(mesh), mode_(mpi_progress()) {}

MpiContext::MpiContext(ProcessGroups groups) : groups_(std::move(groups)), mode_(mpi_progress()) {}

MpiContext::~MpiContext() { complete_all(); }

void MpiContext::complete_all() {
  int finalized = 0;
  FSDPC_MPI_CHECK(MPI_Finalized(&finalized));
  if (finalized) return;  // a context left to static destruction: MPI is gone
  for (auto& [name, p] : pending_)
    if (!p.complete) complete(p);
}

void MpiContext::complete(PendingCollective& p) {
  if (p.complete) return;  // progress() saw it finish (and told the watch)
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
  size_t open = 0;
  for (auto& [name, p] : pending_) {
    if (p.complete) continue;
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
  if (mode_ == MpiProgress::thread && open > 0) mpi_progress_polled();
  return open;
}

void MpiContext::start(const std::string& future, PendingCollective p, const CollectiveInfo& info) {
  if (CollectiveWatch* w = collective_watch()) p.watch_id = w->issued(info);
  if (timeline_) p.timeline_id = timeline_->collective_issued(info);
  auto [it, inserted] = pending_.emplace(future, std::move(p));
  FSDPC_CHECK(inserted) << "collective " << future << " started twice without a wait";
  if (mode_ == MpiProgress::thread) mpi_progress_started();
}

PendingCollective MpiContext::take(const std::string& future) {
  auto it = pending_.find(future);
  FSDPC_CHECK(it != pending_.end()) << "wait on " << future << ", which no MPI collective started";
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

bool reducible(DType d) {
  return d == DType::f32 || d == DType::f64 || d == DType::i64 || d == DType::i32;
}

// The MPI type of `d`; dtypes MPI cannot add move as same-sized integers.
MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i64: return MPI_INT64_T;
    case DType::i32: return MPI_INT32_T;
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
  c.size = groups.size(group);
  c.me = groups.rank_in(group);
  // A trace compiled for another world would compute silently wrong shapes.
  const int64_t size = b.attrs.get_int("size");
  if (size != c.size)
    fail(where(b), ": group '", group, "' has ", c.size, " ranks on the ",
         mesh_description(groups.mesh()), " of this MPI job, but the trace says size=", size);
  const DType d = c.in->dtype;
  if ((b.op == OpId::AllReduce || b.op == OpId::ReduceScatter) && !reducible(d))
    fail(where(b), ": MPI sums f32, f64, i64 and i32, not ", dtype_name(d));
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

// Registers a started collective with the context (and the watch).
void started(KernelContext& kctx, const BoundSymbol& b, const Call& c, PendingCollective p, int count) {
  const CollectiveInfo info{op_name(b.op),  b.output().name, b.inputs.at(0).name, b.attrs.get_str("group"),
                            c.comm,         count,           dtype_name(c.in->dtype), p.bytes};
  mpi_context(kctx).start(b.output().name, std::move(p), info);
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
  FSDPC_MPI_CHECK(MPI_Ireduce_scatter_block(send, c.out_data, count, c.type, MPI_SUM, c.comm,
                                            &p.request));
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
  const MPI_Op op = b.attrs.get_str("op") == "max" ? MPI_MAX : MPI_SUM;
  FSDPC_MPI_CHECK(MPI_Iallreduce(send, c.out_data, count, c.type, op, c.comm, &p.request));
  started(kctx, b, c, std::move(p), count);
}

// This rank's place in the group: known locally, nothing is sent.
void axis_index(KernelContext& kctx, const BoundSymbol& b, const std::vector<TensorView>& in,
                const std::vector<TensorView>& out) {
  FSDPC_CHECK(in.empty() && out.size() == 1 && out[0].data) << where(b) << ": expected one output";
  const ProcessGroups& groups = mpi_context(kctx).groups();
  const std::string& group = b.attrs.get_str("group");
  if (b.attrs.get_int("size") != groups.size(group))
    fail(where(b), ": group '", group, "' has ", groups.size(group), " ranks on the ",
         mesh_description(groups.mesh()), " of this MPI job, but the trace says size=", b.attrs.get_int("size"));
  *static_cast<int64_t*>(out[0].data) = groups.rank_in(group);
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

// Completes the collective that produced the future and puts its value into
// the wait's output: interleaved from scratch for a gather along dim > 0,
// copied when the output is not the future's buffer.
void wait_collective(KernelContext& kctx, const BoundSymbol& b, const std::vector<TensorView>& in,
          const std::vector<TensorView>& out) {
  FSDPC_CHECK(in.size() == 1 && out.size() == 1 && out[0].type) << where(b);
  MpiContext& mpi = mpi_context(kctx);
  PendingCollective p = mpi.take(b.inputs.at(0).name);
  mpi.complete(p);
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

class MpiExecutor final : public Executor {
 public:
  std::string_view name() const override { return "mpi"; }

  bool claims(const BoundSymbol& b) const override {
    if (kernel_or_null(b.op) == nullptr || b.outputs.size() != 1) return false;
    if (b.output().type.device.kind != DeviceKind::cpu) return false;
    if (b.op == OpId::AllReduce || b.op == OpId::ReduceScatter)
      return b.attrs.has("op") &&
             (b.attrs.get_str("op") == "sum" || (b.op == OpId::AllReduce && b.attrs.get_str("op") == "max")) &&
             reducible(b.output().type.dtype);
    return true;
  }

  KernelFn kernel(OpId op) const override {
    KernelFn k = kernel_or_null(op);
    FSDPC_CHECK(k != nullptr) << "the mpi executor has no kernel for " << op_name(op);
    return k;
  }

 private:
  static KernelFn kernel_or_null(OpId op) {
    switch (op) {
      case OpId::AllGather: return all_gather;
      case OpId::ReduceScatter: return reduce_scatter;
      case OpId::AllReduce: return all_reduce;
      case OpId::Broadcast: return broadcast;
      case OpId::Wait: return wait_collective;
      case OpId::AxisIndex: return axis_index;
      default: return nullptr;
    }
  }
};

}  // namespace

const Executor& mpi_executor() {
  static const MpiExecutor executor;
  return executor;
}

}  // namespace fsdpc
