// The NCCL executor's kernels: each collective issues one NCCL call on the
// comm stream after the compute stream's work; `wait` joins it back into the
// compute stream (NcclContext, in nccl_context.cpp).
#include "executors/comm/nccl_executor.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <utility>

#include "executors/comm/collective_executor.h"
#include "executors/comm/nccl_check.h"
#include "executors/comm/nccl_staging.h"
#include "executors/cuda/cuda_check.h"
#include "ir/error.h"

namespace fsdpc {

using cuda::settled;

std::optional<ncclDataType_t> nccl_dtype(DType d) {
  switch (d) {
    case DType::f32: return ncclFloat32;
    case DType::bf16: return ncclBfloat16;
    case DType::f16: return ncclFloat16;
    case DType::f64: return ncclFloat64;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    case DType::i8: return ncclInt8;
    case DType::boolean: break;
  }
  return std::nullopt;
}

// fsdpc train --timeout, FSDPC_TIMEOUT_S, or this executor's older
// FSDPC_NCCL_TIMEOUT_S: one setting for MPI and NCCL (mpi_world.h).
double nccl_timeout_from_env() { return collective_timeout(); }

namespace {

// ---- Shared by the kernels -------------------------------------------------

NcclContext& nccl_context(KernelContext& ctx) {
  auto* nccl = dynamic_cast<NcclContext*>(&ctx);
  FSDPC_CHECK(nccl != nullptr) << "an NCCL kernel was run without an NcclContext";
  return *nccl;
}

bool movable(DType d) { return nccl_dtype(d).has_value() || d == DType::boolean; }

std::string where(const BoundSymbol& b) {
  return std::string(op_name(b.op)) + " -> " + b.output().name;
}

// One collective's operands, checked, and where this rank stands in its group.
struct Call {
  NcclContext* ctx = nullptr;
  const TensorType* in = nullptr;
  const TensorType* out = nullptr;
  void* in_data = nullptr;
  void* out_data = nullptr;
  ncclComm_t comm = nullptr;
  int size = 0;
  ncclDataType_t type = ncclUint8;
  int64_t elem = 0;  // bytes per element
  NcclPending pending;
};

// A recv has no input: its `in` is the type it receives, without data.
Call prepare(KernelContext& kctx, const BoundSymbol& b, const std::vector<TensorView>& in,
             const std::vector<TensorView>& out) {
  const size_t inputs = b.op == OpId::Recv ? 0 : 1;
  FSDPC_CHECK(in.size() == inputs && out.size() == 1 && out[0].type && (in.empty() || in[0].type))
      << where(b) << ": expected " << inputs << " input view(s) and one output view";
  Call c;
  c.ctx = &nccl_context(kctx);
  c.in = in.empty() ? out[0].type : in[0].type;
  c.out = out[0].type;
  c.in_data = in.empty() ? nullptr : in[0].data;
  c.out_data = out[0].data;
  const std::string& group = b.attrs.get_str("group");
  const ProcessGroups& groups = c.ctx->groups();
  c.size = groups.size(group);
  // A trace compiled for another world would compute silently wrong shapes.
  const int64_t size = b.attrs.get_int("size");
  if (size != c.size)
    fail(where(b), ": group '", group, "' has ", c.size, " ranks on the ",
         mesh_description(groups.mesh()), " of this job, but the trace says size=", size);
  c.comm = c.ctx->world().comm(group);
  FSDPC_CHECK(c.comm != nullptr) << where(b) << ": the NCCL communicators were aborted";
  const DType d = c.in->dtype;
  const bool sums = b.op == OpId::AllReduce || b.op == OpId::ReduceScatter;
  const std::string& op = sums ? b.attrs.get_str("op") : std::string();
  if (sums && !(nccl_dtype(d) && (op == "sum" || (op == "max" && b.op == OpId::AllReduce))))
    fail(where(b), ": NCCL reduces f32, bf16, f16, f64, i32 and i64 (op=sum; all_reduce also max), not ",
         dtype_name(d), " with op=", op);
  if (!movable(d)) fail(where(b), ": NCCL cannot move ", dtype_name(d));
  c.type = nccl_dtype(d).value_or(ncclUint8);  // bool: one byte each
  c.elem = dtype_size(d);
  if (b.op == OpId::Broadcast && (b.attrs.get_int("root") < 0 || b.attrs.get_int("root") >= c.size))
    fail(where(b), ": root ", b.attrs.get_int("root"), " is outside a group of ", c.size, " ranks");
  FSDPC_CHECK((c.in_data || in.empty() || numel(c.in->shape) == 0) && (c.out_data || numel(c.out->shape) == 0))
      << where(b) << ": a tensor without a buffer";
  c.pending.result = c.out_data;
  c.pending.bytes = numel(c.out->shape) * c.elem;
  c.pending.what = std::string(op_name(b.op)) + "(" + (in.empty() ? std::string() : b.inputs.at(0).name + ", ") +
                   "group=" + group + ") -> " + b.output().name;
  c.pending.kind = std::string(op_name(b.op));
  return c;
}

// After every check and allocation that can throw (staging comes from the
// compute stream's side): the comm stream waits for the compute stream,
// where the input was produced.
void begin(Call& c) {
  c.ctx->comm_after_compute();
  if (c.ctx->timing()) {
    c.pending.started = c.ctx->acquire_event();
    FSDPC_CUDA_CHECK(cudaEventRecord(c.pending.started, c.ctx->comm()));
  }
}

// One cudaMemcpy2DAsync per entry of a staging plan.
void copy_plan(const std::vector<Copy2D>& plan, void* dst, const void* src, cudaStream_t stream) {
  for (const Copy2D& k : plan)
    FSDPC_CUDA_CHECK(cudaMemcpy2DAsync(static_cast<std::byte*>(dst) + k.dst_offset, k.dst_pitch,
                                       static_cast<const std::byte*>(src) + k.src_offset, k.src_pitch, k.width,
                                       k.height, cudaMemcpyDeviceToDevice, stream));
}

// Records the collective's completion on the comm stream and hands it to
// its wait.
void finish(Call& c, const BoundSymbol& b) {
  c.pending.done = c.ctx->acquire_event();
  FSDPC_CUDA_CHECK(cudaEventRecord(c.pending.done, c.ctx->comm()));
  c.ctx->start(b.output().name, std::move(c.pending));
}

int64_t prod(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

// Every rank holds the same shapes, so a zero-sized collective is skipped on
// all of them alike (NCCL's argument checks reject null buffers).
size_t count(const Shape& s) { return static_cast<size_t>(numel(s)); }

// ---- Kernels ---------------------------------------------------------------

// Members' inputs side by side along `dim`. Along dim 0 (what traces gather)
// that is their concatenation, gathered straight into the future; along a
// later dim the blocks land in scratch and are interleaved at wait.
void all_gather(KernelContext& kctx, const BoundSymbol& b, const std::vector<TensorView>& in,
                const std::vector<TensorView>& out) {
  Call c = prepare(kctx, b, in, out);
  const size_t dim = static_cast<size_t>(b.attrs.get_int("dim"));
  const Shape& xs = c.in->shape;
  FSDPC_CHECK(dim < xs.size() && numel(c.out->shape) == numel(xs) * c.size) << where(b);
  void* recv = c.out_data;
  if (prod(xs, 0, dim) > 1 && c.pending.bytes > 0) {
    c.pending.scratch = c.ctx->scratch(static_cast<size_t>(c.pending.bytes), true);
    recv = c.pending.scratch.get();
    c.pending.outer = prod(xs, 0, dim);
    c.pending.inner_bytes = prod(xs, dim, xs.size()) * c.elem;
    c.pending.members = c.size;
  }
  begin(c);
  if (count(xs) > 0)
    FSDPC_NCCL_CHECK(ncclAllGather(c.in_data, recv, count(xs), c.type, c.comm, c.ctx->comm()));
  finish(c, b);
}

// The sum, of which the group's i-th member keeps the i-th chunk along `dim`. NCCL
// scatters contiguous blocks, so along a later dim the input is first
// reordered (on the comm stream) to put each member's chunk in one block.
void reduce_scatter(KernelContext& kctx, const BoundSymbol& b, const std::vector<TensorView>& in,
                    const std::vector<TensorView>& out) {
  Call c = prepare(kctx, b, in, out);
  const size_t dim = static_cast<size_t>(b.attrs.get_int("dim"));
  const Shape& xs = c.in->shape;
  FSDPC_CHECK(dim < xs.size() && numel(c.out->shape) * c.size == numel(xs)) << where(b);
  FSDPC_CHECK(c.in_data != c.out_data || numel(xs) == 0 || c.size == 1)
      << where(b) << ": the output may not alias the input";
  const cudaStream_t stream = c.ctx->comm();
  const void* send = c.in_data;
  const int64_t outer = prod(xs, 0, dim);
  const bool pack = outer > 1 && c.size > 1 && c.pending.bytes > 0;
  if (pack) c.pending.send_staging = c.ctx->scratch(static_cast<size_t>(numel(xs) * c.elem), true);
  begin(c);
  if (pack) {
    // staging[m][o] = input[o][m], one strided copy per member, on the comm
    // stream; held until the wait, since the reduction reads it there.
    copy_plan(scatter_pack_plan(outer, c.pending.bytes / outer, c.size), c.pending.send_staging.get(), c.in_data,
              stream);
    send = c.pending.send_staging.get();
  }
  if (count(c.out->shape) > 0)
    FSDPC_NCCL_CHECK(ncclReduceScatter(send, c.out_data, count(c.out->shape), c.type, ncclSum, c.comm, stream));
  finish(c, b);
}

void all_reduce(KernelContext& kctx, const BoundSymbol& b, const std::vector<TensorView>& in,
                const std::vector<TensorView>& out) {
  Call c = prepare(kctx, b, in, out);
  FSDPC_CHECK(c.out->shape == c.in->shape) << where(b);
  begin(c);
  if (count(c.in->shape) > 0)
    FSDPC_NCCL_CHECK(ncclAllReduce(c.in_data, c.out_data, count(c.in->shape), c.type,
                                   b.attrs.get_str("op") == "max" ? ncclMax : ncclSum, c.comm, c.ctx->comm()));
  finish(c, b);
}

// The root's input, everywhere. NCCL broadcasts out of place, so unlike MPI
// the root needs no copy into the future first.
void broadcast(KernelContext& kctx, const BoundSymbol& b, const std::vector<TensorView>& in,
               const std::vector<TensorView>& out) {
  Call c = prepare(kctx, b, in, out);
  FSDPC_CHECK(c.out->shape == c.in->shape) << where(b);
  const int root = static_cast<int>(b.attrs.get_int("root"));  // checked by prepare
  begin(c);
  if (count(c.in->shape) > 0)
    FSDPC_NCCL_CHECK(ncclBroadcast(c.in_data, c.out_data, count(c.in->shape), c.type, root,
                                   c.comm, c.ctx->comm()));
  finish(c, b);
}

// send and recv (pipeline stages): one ncclSend or ncclRecv on the comm
// stream, issued and waited like a collective. NCCL matches them in issue
// order per pair of ranks; a send holds the comm stream until the peer's
// recv runs, so traces must not make two ranks send to each other first.
// NCCL cannot see the sender's size: a recv's type is trusted here (the
// reference and MPI executors check it).
int peer_of(const Call& c, const BoundSymbol& b) {
  const std::string& group = b.attrs.get_str("group");
  const int64_t peer = b.attrs.get_int("peer");
  if (peer < 0 || peer >= c.size) fail(where(b), ": peer ", peer, " is outside group '", group, "' of ", c.size, " ranks");
  if (peer == c.ctx->groups().rank_in(group))
    fail(where(b), ": peer ", peer, " is this rank's own position in group '", group, "'; a message goes to another rank");
  return static_cast<int>(peer);
}

// The input goes to `peer`; the future holds it too (the sender keeps its value).
void send_to_peer(KernelContext& kctx, const BoundSymbol& b, const std::vector<TensorView>& in,
                  const std::vector<TensorView>& out) {
  Call c = prepare(kctx, b, in, out);
  FSDPC_CHECK(c.out->shape == c.in->shape) << where(b);
  const int peer = peer_of(c, b);
  begin(c);
  if (c.out_data != c.in_data && c.pending.bytes > 0)
    FSDPC_CUDA_CHECK(cudaMemcpyAsync(c.out_data, c.in_data, c.pending.bytes, cudaMemcpyDeviceToDevice, c.ctx->comm()));
  if (count(c.in->shape) > 0)
    FSDPC_NCCL_CHECK(ncclSend(c.in_data, count(c.in->shape), c.type, peer, c.comm, c.ctx->comm()));
  finish(c, b);
}

void recv_from_peer(KernelContext& kctx, const BoundSymbol& b, const std::vector<TensorView>& in,
                    const std::vector<TensorView>& out) {
  Call c = prepare(kctx, b, in, out);
  const int peer = peer_of(c, b);
  begin(c);
  if (count(c.out->shape) > 0)
    FSDPC_NCCL_CHECK(ncclRecv(c.out_data, count(c.out->shape), c.type, peer, c.comm, c.ctx->comm()));
  finish(c, b);
}

// Joins the collective that produced the future into the compute stream and
// puts its value into the wait's output there: interleaved from scratch for
// a gather along dim > 0, copied when the output is not the future's buffer.
void wait_collective(KernelContext& kctx, const BoundSymbol& b, const std::vector<TensorView>& in,
                     const std::vector<TensorView>& out) {
  FSDPC_CHECK(in.size() == 1 && out.size() == 1 && out[0].type) << where(b);
  NcclContext& ctx = nccl_context(kctx);
  NcclPending p = ctx.join(b.inputs.at(0).name);
  FSDPC_CHECK(numel(out[0].type->shape) * dtype_size(out[0].type->dtype) == p.bytes)
      << where(b) << ": output of " << type_str(*out[0].type) << " for " << p.bytes << " bytes";
  const cudaStream_t stream = ctx.compute();
  if (p.scratch) {
    // scratch is [member][outer][inner]; the result is [outer][member][inner].
    copy_plan(gather_unpack_plan(p.outer, p.inner_bytes, p.members), out[0].data, p.scratch.get(), stream);
  } else if (out[0].data != p.result && p.bytes > 0) {
    FSDPC_CUDA_CHECK(cudaMemcpyAsync(out[0].data, p.result, p.bytes, cudaMemcpyDeviceToDevice, stream));
  }
}

// This rank's place in the group, written on the compute stream, where the
// statements that read it run. Nothing is sent.
void axis_index(KernelContext& kctx, const BoundSymbol& b, const std::vector<TensorView>& in,
                const std::vector<TensorView>& out) {
  FSDPC_CHECK(in.empty() && out.size() == 1 && out[0].data) << where(b) << ": expected one output";
  NcclContext& ctx = nccl_context(kctx);
  const ProcessGroups& groups = ctx.groups();
  const std::string& group = b.attrs.get_str("group");
  if (b.attrs.get_int("size") != groups.size(group))
    fail(where(b), ": group '", group, "' has ", groups.size(group), " ranks on the ",
         mesh_description(groups.mesh()), " of this job, but the trace says size=", b.attrs.get_int("size"));
  const int64_t me = groups.rank_in(group);  // pageable: copied out before the call returns
  FSDPC_CUDA_CHECK(cudaMemcpyAsync(out[0].data, &me, sizeof me, cudaMemcpyHostToDevice, ctx.compute()));
}

// ---- The executor ----------------------------------------------------------

bool reduces(DType d) { return nccl_dtype(d).has_value(); }

}  // namespace

const Executor& nccl_executor() {
  static const CollectiveExecutor executor(CollectiveBackend{
      "nccl", DeviceKind::cuda,
      {{OpId::AllGather, all_gather},
       {OpId::ReduceScatter, reduce_scatter},
       {OpId::AllReduce, all_reduce},
       {OpId::Broadcast, broadcast},
       {OpId::Wait, wait_collective},
       {OpId::AxisIndex, axis_index},
       {OpId::Send, send_to_peer},
       {OpId::Recv, recv_from_peer}},
      movable, reduces});
  return executor;
}

}  // namespace fsdpc
