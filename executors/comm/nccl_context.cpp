// NcclContext (executors/comm/nccl_executor.h): the comm stream, the
// events that order it against the compute stream, the collectives in
// flight and their joins, the timeout and the teardown. The kernels that
// issue on it are in nccl_executor.cpp.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <utility>

#include "executors/comm/nccl_check.h"
#include "executors/comm/nccl_executor.h"
#include "executors/cuda/cuda_check.h"
#include "ir/error.h"

namespace fsdpc {

using cuda::settled;

namespace {

// Teardown reports instead of aborting: it runs on error paths too, where a
// second abort would hide the first message.
void report(cudaError_t rc, const char* call) {
  if (rc != cudaSuccess)
    std::fprintf(stderr, "fsdpc: %s returned %s: %s\n", call, cudaGetErrorName(rc), cudaGetErrorString(rc));
}

}  // namespace

// ---- NcclContext -------------------------------------------------------------

NcclContext::NcclContext(const Mesh& mesh, const cuda::CudaOptions& options)
    : NcclContext(ProcessGroups(mesh), options) {}

NcclContext::NcclContext(ProcessGroups groups, const cuda::CudaOptions& options)
    : cuda::CudaContext(options),
      timeout_s_(nccl_timeout_from_env()),  // before NCCL init: a bad value throws on every rank
      timing_(std::getenv("FSDPC_NCCL_TIMING") && std::string(std::getenv("FSDPC_NCCL_TIMING")) == "1"),
      groups_(std::move(groups)),
      world_(groups_, device()) {
  FSDPC_CUDA_CHECK(cudaEventCreateWithFlags(&compute_ready_, cudaEventDisableTiming));
}

NcclContext::~NcclContext() {
  NcclContext::quiesce();
  pending_.clear();  // staging freed on compute, after the drain or the abort
  for (const Joined& j : joined_) {
    report(cudaEventDestroy(j.done), "cudaEventDestroy");
    if (j.started) report(cudaEventDestroy(j.started), "cudaEventDestroy");
  }
  for (cudaEvent_t e : free_events_) report(cudaEventDestroy(e), "cudaEventDestroy");
  report(cudaEventDestroy(compute_ready_), "cudaEventDestroy");
  // ~CudaContext then polls both streams, which the drain or the abort has emptied.
}

void NcclContext::quiesce() noexcept {
  if (quiesced_) return;
  quiesced_ = true;
  if (!world_.aborted()) {
    std::string why;
    if (!pending_.empty())
      why = "collectives never waited on: " + running_collectives();
    else if (std::uncaught_exceptions() > 0)
      why = "an exception unwinds the NCCL context";
    else
      drain(Streams::both, timeout_s_, "the streams at teardown", why);  // leaves `why` empty when idle
    if (!why.empty()) {
      std::fprintf(stderr, "fsdpc: aborting the NCCL communicators: %s\n", why.c_str());
      world_.abort_all();
    }
  }
  // Events of collectives never waited on: their kernels were aborted.
  for (auto& [name, p] : pending_) {
    report(cudaEventDestroy(p.done), "cudaEventDestroy");
    if (p.started) report(cudaEventDestroy(p.started), "cudaEventDestroy");
    p.done = p.started = nullptr;
  }
}

void NcclContext::use_scratch_pool(ScratchPool* pool) {
  if (!pool) {
    quiesce();
    for (auto& [name, p] : pending_) {
      p.scratch.reset();
      p.send_staging.reset();
    }
  }
  cuda::CudaContext::use_scratch_pool(pool);
}

void NcclContext::wait_idle(Streams which, const char* what) {
  std::string why;
  if (drain(which, timeout_s_, what, why) != Drain::idle) abort_with(why);
}

void NcclContext::comm_after_compute() {
  // One event serves every collective: cudaStreamWaitEvent waits for the
  // record made before it, so re-recording for the next one is safe.
  FSDPC_CUDA_CHECK(cudaEventRecord(compute_ready_, compute()));
  FSDPC_CUDA_CHECK(cudaStreamWaitEvent(comm(), compute_ready_, 0));
}

cudaEvent_t NcclContext::acquire_event() {
  if (free_events_.empty()) recycle_completed();
  if (free_events_.empty()) {
    cudaEvent_t e = nullptr;
    FSDPC_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing_ ? cudaEventDefault : cudaEventDisableTiming));
    return e;
  }
  cudaEvent_t e = free_events_.back();
  free_events_.pop_back();
  return e;
}

// Joined events go back to the pool once complete. Re-recording an
// incomplete one would be safe for the streams, but the timeout message
// names collectives by their events.
void NcclContext::recycle_completed() {
  auto done = [&](const Joined& j) {
    const cudaError_t rc = settled(cudaEventQuery(j.done));
    if (rc == cudaErrorNotReady) return false;
    FSDPC_CUDA_CHECK(rc);
    if (j.started) {
      float ms = 0;
      FSDPC_CUDA_CHECK(cudaEventElapsedTime(&ms, j.started, j.done));
      auto t = std::find_if(times_.begin(), times_.end(), [&](const CollectiveTime& c) { return c.kind == j.kind; });
      if (t == times_.end()) t = times_.insert(times_.end(), CollectiveTime{j.kind, 0, 0, 0});
      ++t->count;
      t->bytes += j.bytes;
      t->ms += ms;
      free_events_.push_back(j.started);
    }
    free_events_.push_back(j.done);
    return true;
  };
  joined_.erase(std::remove_if(joined_.begin(), joined_.end(), done), joined_.end());
}

void NcclContext::start(const std::string& future, NcclPending p) {
  quiesced_ = false;  // new work: a later teardown drains (or aborts) again
  auto [it, inserted] = pending_.emplace(future, std::move(p));
  FSDPC_CHECK(inserted) << "collective " << future << " issued twice without a wait";
}

NcclPending NcclContext::join(const std::string& future) {
  auto it = pending_.find(future);
  FSDPC_CHECK(it != pending_.end()) << "wait on " << future << ", which no NCCL collective issued";
  NcclPending p = std::move(it->second);
  pending_.erase(it);
  FSDPC_CUDA_CHECK(cudaStreamWaitEvent(compute(), p.done, 0));
  joined_.push_back({p.what, p.done, p.started, p.kind, p.bytes});
  p.done = nullptr;
  p.started = nullptr;
  return p;
}

std::string NcclContext::async_error() const {
  for (const NcclWorld::Group& g : world_.groups()) {
    if (!g.owner || !g.comm) continue;
    ncclResult_t state = ncclSuccess;
    const ncclResult_t rc = ncclCommGetAsyncError(g.comm, &state);
    if (rc != ncclSuccess) state = rc;  // a communicator that cannot answer is as broken
    if (state == ncclSuccess || state == ncclInProgress) continue;
    const char* last = ncclGetLastError(g.comm);
    return "the NCCL communicator of group " + g.name + " reported " + ncclGetErrorString(state) +
           (last && *last ? std::string(": ") + last : std::string());
  }
  return {};
}

void NcclContext::check_async_errors() {
  if (std::string why = async_error(); !why.empty()) abort_with(why);
}

NcclContext::Drain NcclContext::drain(Streams which, double seconds, const char* what, std::string& why) {
  const cuda::WaitResult r = cuda::poll_until_ready(
      [&](std::string& w) { return poll_streams(which, w); }, [&] { return async_error(); }, seconds);
  why = r.why;
  if (r.kind == cuda::WaitResult::ready) return Drain::idle;
  if (r.kind == cuda::WaitResult::failed) {
    why = std::string("waiting for ") + what + ": " + why;
    return Drain::error;
  }
  why = std::string("waiting for ") + what + ": the " +
        (which == Streams::both ? "compute and comm streams" : "compute stream") + " did not finish within " +
        std::to_string(seconds) + " s (the collective timeout); collectives still running: " + running_collectives();
  return Drain::timeout;
}

std::vector<CollectiveTime> NcclContext::take_times() {
  std::vector<CollectiveTime> out;
  out.swap(times_);
  return out;
}

void NcclContext::synchronize_with_timeout(double seconds) {
  std::string why;
  if (drain(Streams::both, seconds, "the end of the step", why) != Drain::idle) abort_with(why);
  recycle_completed();  // every joined event is complete now
}

std::string NcclContext::running_collectives() {
  std::vector<std::string> names;
  auto running = [](cudaEvent_t e) { return e && settled(cudaEventQuery(e)) != cudaSuccess; };
  for (const auto& [name, p] : pending_)
    if (running(p.done)) names.push_back(p.what + " (not waited on)");
  for (const Joined& j : joined_)
    if (running(j.done)) names.push_back(j.what);
  if (names.empty()) return "none issued by NCCL (a compute kernel is still running)";
  std::sort(names.begin(), names.end());
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : "; ") + n;
  return s;
}

void NcclContext::abort_with(const std::string& why) {
  world_.abort_all();  // stops the kernels the peers would otherwise wait on
  detail::CheckFailure(__FILE__, __LINE__, "NCCL collectives").stream() << why;
  __builtin_unreachable();  // ~CheckFailure aborts
}

}  // namespace fsdpc
