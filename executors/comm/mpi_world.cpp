// MPI's lifetime in an fsdpc process, the progress thread of
// FSDPC_MPI_PROGRESS=thread, and the communicators of a mesh's process
// groups, split from MPI_COMM_WORLD so members keep the mesh's order.
#include "executors/comm/mpi_world.h"

#include <sched.h>
#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>

#include "executors/comm/mpi_check.h"
#include "executors/comm/mpi_reduce_ops.h"
#include "ir/error.h"

namespace fsdpc {

namespace {

bool mpi_finalized() {
  int finalized = 0;
  FSDPC_MPI_CHECK(MPI_Finalized(&finalized));
  return finalized != 0;
}

// ---- The progress thread (thread mode) --------------------------------------

// The longest a pending collective goes without a call into Open MPI's
// progress engine while the rank computes. 10 Gbit/s moves 625 KB in 500 us,
// well within a TCP socket's buffers (Linux grows them to 4 MB), so each call
// finds the link still busy with what the last one queued.
constexpr auto kProgressPause = std::chrono::microseconds(500);
// While the rank's thread waits inside MPI the thread only looks for the
// wait's end, less often: the rank tests its collectives between the next
// kernels itself, so the thread's first probe after a wait is needed only
// once a long kernel has begun.
constexpr auto kRestWhileWaiting = 4 * kProgressPause;
// Between short kernels the rank's own calls keep its collectives moving,
// and the thread backs off to one look per kLongestPause: a long kernel may
// then run this long before the thread's first probe.
constexpr auto kLongestPause = 4 * kProgressPause;
// With nothing pending the thread keeps its kLongestPause timer this long,
// then sleeps until a collective starts (an idle rank costs nothing).
constexpr auto kIdle = std::chrono::milliseconds(200);

using ProgressClock = std::chrono::steady_clock;

int64_t progress_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(ProgressClock::now().time_since_epoch()).count();
}

// One per process, started on the first collective, joined before
// MPI_Finalize. It calls MPI only when the rank's thread has not for
// kProgressPause: the rank's own calls (starting a collective, testing the
// pending ones between kernels, MPI_Wait) progress them just as well, so
// while kernels are short the thread only wakes on its timer, finds a recent
// call and sleeps again, backing off to one wake-up per kLongestPause;
// during a long kernel it probes every kProgressPause. It never probes
// while the rank's thread waits inside MPI (MpiWaitScope), and sleeps on a
// condition variable without a timer once nothing was pending for kIdle.
// Sharing a core with the rank, it costs a timer wake-up per kLongestPause
// while the rank trains (runs short kernels, waits, or has nothing pending
// for less than kIdle), a few microseconds each, plus its probes during long
// kernels; the rank's thread wakes it only after an idle spell.
class ProgressThread {
 public:
  void started() {
    polled();
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      FSDPC_CHECK(!stopping_) << "a collective was started after the MPI progress thread stopped";
      if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
      ++pending_;
      wake = asleep_;  // otherwise it is on its timer already
    }
    if (wake) cv_.notify_one();
  }

  void completed() {
    std::lock_guard<std::mutex> lock(mu_);
    FSDPC_CHECK(pending_ > 0) << "more MPI collectives completed than started";
    --pending_;
  }

  // The rank's thread just drove Open MPI's progress (MPI_Test between
  // kernels): the thread's next probe can wait a full pause from now.
  void polled() { last_poll_ns_.store(progress_now_ns(), std::memory_order_relaxed); }

  // Inside a wait the thread holds off; it reads the flag on its timer, so
  // neither entering nor leaving a wait wakes it.
  void waiting(bool on) {
    if (!on) polled();
    waiting_.store(on, std::memory_order_relaxed);
  }

  void check() const {
    if (!failed_.load(std::memory_order_acquire)) return;
    detail::mpi_call_failed(failed_file_, failed_line_, failed_call_, failed_code_);
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

  // Probes made (for the benchmark's report of the thread's cost).
  uint64_t probes() const { return probes_.load(std::memory_order_relaxed); }

 private:
  void loop() {
    prctl(PR_SET_TIMERSLACK, 1UL);  // its pauses are hundreds of microseconds
    // Its own communicator, which nobody sends on: MPI_Iprobe there never
    // matches a message, it only runs the progress engine.
    MPI_Comm comm = MPI_COMM_NULL;
    if (!call(MPI_Comm_dup(MPI_COMM_SELF, &comm), __LINE__, "MPI_Comm_dup(MPI_COMM_SELF, &comm)")) return;
    int64_t last_probe_ns = 0;
    // How long it sleeps after finding the rank's thread had called MPI
    // recently: doubled each time (short kernels, the rank keeps up by
    // itself), back to kProgressPause once it probes (a long kernel).
    auto pause = std::chrono::duration_cast<std::chrono::nanoseconds>(kProgressPause);
    ProgressClock::time_point last_pending = ProgressClock::now();
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (stopping_) break;
      const auto now = ProgressClock::now();
      if (pending_ == 0) {
        // Training starts a collective every few milliseconds, often one at
        // a time: waking the thread for each (it shares the rank's core) cost
        // gpt2-tiny a third of its step across two single-core nodes. So it
        // stays on its timer, and sleeps without one only after kIdle.
        if (now - last_pending < kIdle) {
          cv_.wait_until(lock, now + kLongestPause, [&] { return stopping_; });
        } else {
          asleep_ = true;
          cv_.wait(lock, [&] { return stopping_ || pending_ > 0; });
          asleep_ = false;
        }
        continue;
      }
      last_pending = now;
      auto at = [](int64_t ns) { return ProgressClock::time_point(std::chrono::nanoseconds(ns)); };
      const auto polled = at(last_poll_ns_.load(std::memory_order_relaxed)), probed = at(last_probe_ns);
      if (waiting_.load(std::memory_order_relaxed)) {
        cv_.wait_until(lock, now + kRestWhileWaiting, [&] { return stopping_; });
        continue;
      }
      if (now < polled + kProgressPause) {  // the rank keeps up by itself
        pause = std::min<std::chrono::nanoseconds>(2 * pause, kLongestPause);
        cv_.wait_until(lock, polled + pause, [&] { return stopping_; });
        continue;
      }
      pause = kProgressPause;
      if (now < probed + kProgressPause) {  // probing every kProgressPause
        cv_.wait_until(lock, probed + kProgressPause, [&] { return stopping_; });
        continue;
      }
      lock.unlock();
      int flag = 0;
      const int rc = MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, MPI_STATUS_IGNORE);
      last_probe_ns = progress_now_ns();
      probes_.fetch_add(1, std::memory_order_relaxed);
      lock.lock();
      if (!call(rc, __LINE__, "MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, MPI_STATUS_IGNORE)")) return;
    }
    lock.unlock();
    call(MPI_Comm_free(&comm), __LINE__, "MPI_Comm_free(&comm)");
  }

  // Records a failure for the rank's thread to report (its waits go on,
  // polled by the rank's thread alone). False: stop.
  bool call(int rc, int line, const char* text) {
    if (rc == MPI_SUCCESS) return true;
    failed_file_ = __FILE__;
    failed_line_ = line;
    failed_call_ = text;
    failed_code_ = rc;
    failed_.store(true, std::memory_order_release);
    return false;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  int pending_ = 0;
  bool asleep_ = false;  // on the condition variable without a timer
  bool stopping_ = false;
  std::atomic<bool> waiting_{false};
  std::atomic<int64_t> last_poll_ns_{0};
  std::atomic<uint64_t> probes_{0};
  std::atomic<bool> failed_{false};  // then the fields below are set, never changed
  const char* failed_file_ = "";
  int failed_line_ = 0;
  const char* failed_call_ = "";
  int failed_code_ = MPI_SUCCESS;
  std::thread thread_;
};

ProgressThread& progress_thread() {
  static ProgressThread* thread = new ProgressThread;  // outlives every static; joined at exit
  return *thread;
}

MpiProgress g_progress = MpiProgress::poll;

// Whether the launcher placed this job's ranks on more than one node (Open
// MPI's variables, then MPICH/Hydra's); false when it does not say.
bool spans_nodes() {
  auto count = [](const char* a, const char* b) {
    for (const char* name : {a, b})
      if (const char* v = std::getenv(name)) return std::atoi(v);
    return 0;
  };
  const int local = count("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS");
  const int world = count("OMPI_COMM_WORLD_SIZE", "PMI_SIZE");
  return local > 0 && world > local;
}

// FSDPC_MPI_PROGRESS: poll (also when unset or empty), thread, or auto:
// thread when the job spans nodes, poll on one. `named`: thread was asked
// for by name.
MpiProgress requested_progress(bool* named) {
  const char* env = std::getenv("FSDPC_MPI_PROGRESS");
  const std::string v = env ? env : "";
  *named = v == "thread";
  if (v.empty() || v == "poll") return MpiProgress::poll;
  if (v == "thread") return MpiProgress::thread;
  if (v == "auto") return spans_nodes() ? MpiProgress::thread : MpiProgress::poll;
  fail("FSDPC_MPI_PROGRESS='", v, "': expected poll, thread or auto (unset: poll)");
}

void finalize_at_exit() {
  progress_thread().stop();
  if (!mpi_finalized()) MPI_Finalize();  // at exit nothing is left to report to
}

// Every rank creates the same groups in the same order (collective calls).
constexpr const char* kGroupNames[] = {"dp", "shard", "replicate", "tp", "pp", "pp_tied"};

// Our communicators return error codes so FSDPC_MPI_CHECK can name the call.
void return_errors(MPI_Comm comm) { FSDPC_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN)); }

// The communicator of group `name` holding `rank`. A group of the whole world
// (dp without tensor parallelism) is a dup; the others are split with the
// group's lowest rank as color (it names the group uniquely) and the world
// rank as key, so members are ordered as Mesh::group_ranks lists them.
MPI_Comm make_comm(const Mesh& mesh, const std::string& name, int rank) {
  const std::vector<int> members = mesh.group_ranks(name, rank);
  MPI_Comm comm = MPI_COMM_NULL;
  if (static_cast<int>(members.size()) == mesh.world())
    FSDPC_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  else
    FSDPC_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, members.front(), rank, &comm));
  return_errors(comm);
  int size = 0, me = 0;
  FSDPC_MPI_CHECK(MPI_Comm_size(comm, &size));
  FSDPC_MPI_CHECK(MPI_Comm_rank(comm, &me));
  FSDPC_CHECK(size == static_cast<int>(members.size()) && members[me] == rank)
      << "group " << name << " of rank " << rank << ": communicator of " << size
      << " ranks puts it at " << me << ", the mesh lists " << members.size();
  return comm;
}

}  // namespace

void mpi_init(int* argc, char*** argv) {
  static bool done = false;  // mpi_init runs on the rank's thread only
  if (done) return;
  int initialized = 0;
  FSDPC_MPI_CHECK(MPI_Initialized(&initialized));
  bool named = false;
  const MpiProgress want = requested_progress(&named);  // throws before MPI starts
  done = true;
  if (initialized) {
    int level = 0;
    FSDPC_MPI_CHECK(MPI_Query_thread(&level));
    g_progress = want == MpiProgress::thread && level >= MPI_THREAD_MULTIPLE ? want : MpiProgress::poll;
    if (!mpi_finalized()) detail::create_mpi_reduce_ops();  // freed by their MPI_Finalize
    return;
  }
  const int need = want == MpiProgress::thread ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED;
  int provided = 0;
  FSDPC_MPI_CHECK(MPI_Init_thread(argc, argv, need, &provided));
  return_errors(MPI_COMM_WORLD);
  detail::create_mpi_reduce_ops();  // freed at the start of MPI_Finalize
  std::atexit(finalize_at_exit);
  FSDPC_CHECK(provided >= MPI_THREAD_FUNNELED)
      << "MPI provides thread level " << provided << ", fsdpc needs MPI_THREAD_FUNNELED";
  g_progress = provided >= need ? want : MpiProgress::poll;
  if (named && g_progress != want)
    fail("FSDPC_MPI_PROGRESS=thread needs MPI_THREAD_MULTIPLE, and this MPI provides thread level ", provided,
         " (use FSDPC_MPI_PROGRESS=poll)");
}

MpiProgress mpi_progress() {
  mpi_init();
  return g_progress;
}

const char* mpi_progress_name(MpiProgress mode) { return mode == MpiProgress::thread ? "thread" : "poll"; }

void mpi_progress_started() { progress_thread().started(); }
void mpi_progress_completed() { progress_thread().completed(); }
void mpi_progress_check() { progress_thread().check(); }
void mpi_progress_polled() { progress_thread().polled(); }
uint64_t mpi_progress_probes() { return progress_thread().probes(); }

MpiWaitScope::MpiWaitScope() {
  if (g_progress == MpiProgress::thread) progress_thread().waiting(true);
}

MpiWaitScope::~MpiWaitScope() {
  if (g_progress == MpiProgress::thread) progress_thread().waiting(false);
}

int mpi_world_rank() {
  mpi_init();
  int rank = 0;
  FSDPC_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  return rank;
}

int mpi_world_size() {
  mpi_init();
  int size = 0;
  FSDPC_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  return size;
}

int mpi_ranks_on_host() {
  mpi_init();
  MPI_Comm host = MPI_COMM_NULL;
  int on_host = 1;
  FSDPC_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host));
  FSDPC_MPI_CHECK(MPI_Comm_size(host, &on_host));
  FSDPC_MPI_CHECK(MPI_Comm_free(&host));
  return on_host;
}

void mpi_abort(int exit_code) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized && !mpi_finalized()) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::exit(exit_code);
}

// ---- The collective watchdog's side -------------------------------------------

namespace {

CollectiveWatch* g_watch = nullptr;
double g_timeout_s = 0;  // 0: not set by set_collective_timeout

// How often a blocked wait hands the watch a safe point.
constexpr auto kSafePointEvery = std::chrono::milliseconds(100);
// A wait spins on MPI_Test this long, then yields the core between tests
// (ranks may share cores, as Open MPI's mpi_yield_when_idle does).
constexpr auto kSpinFor = std::chrono::microseconds(200);

}  // namespace

namespace {
// The flight recorder's name for the element type of the runtime's own
// collectives.
std::string_view watched_dtype(MPI_Datatype type) {
  if (type == MPI_DOUBLE) return "f64";
  if (type == MPI_INT) return "i32";
  if (type == MPI_UINT64_T) return "u64";
  return "u8";  // MPI_BYTE, MPI_CHAR
}
}  // namespace

void set_collective_watch(CollectiveWatch* watch) { g_watch = watch; }
CollectiveWatch* collective_watch() { return g_watch; }

namespace {

// Calls `done` (an MPI_Test-like poll) until it returns true, handing the
// watch a safe point every kSafePointEvery and `id` once its timeout passes.
template <class Done>
void poll_watched(uint64_t id, Done&& done) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const auto limit = std::chrono::duration<double>(g_watch->timeout_s());
  Clock::time_point next_safe_point = start + kSafePointEvery;
  while (!done()) {
    const Clock::time_point now = Clock::now();
    if (now - start > limit) g_watch->expired(id, std::chrono::duration<double>(now - start).count());
    if (now >= next_safe_point) {
      g_watch->waiting();
      next_safe_point = Clock::now() + kSafePointEvery;
    }
    if (now - start > kSpinFor) sched_yield();
  }
}

}  // namespace

void mpi_wait_watched(MPI_Request* request, uint64_t id) {
  MpiWaitScope in_mpi;
  if (g_watch == nullptr) {
    FSDPC_MPI_CHECK(MPI_Wait(request, MPI_STATUS_IGNORE));
    return;
  }
  poll_watched(id, [&] {
    int done = 0;
    FSDPC_MPI_CHECK(MPI_Test(request, &done, MPI_STATUS_IGNORE));
    return done != 0;
  });
}

void mpi_mprobe_watched(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status, uint64_t id) {
  MpiWaitScope in_mpi;
  if (g_watch == nullptr) {
    FSDPC_MPI_CHECK(MPI_Mprobe(source, tag, comm, message, status));
    return;
  }
  poll_watched(id, [&] {
    int found = 0;
    FSDPC_MPI_CHECK(MPI_Improbe(source, tag, comm, &found, message, status));
    return found != 0;
  });
}

namespace {

// Records a started runtime collective with the watch (if any), waits for it
// under the watch's timeout and records its completion: what every
// watched_* below does once its request exists.
void wait_recorded(MPI_Request* request, const CollectiveInfo& info) {
  const uint64_t id = g_watch ? g_watch->issued(info) : 0;
  mpi_wait_watched(request, id);
  if (g_watch) g_watch->completed(id);
}

int64_t type_bytes(MPI_Datatype type, int64_t count) {
  int size = 0;
  FSDPC_MPI_CHECK(MPI_Type_size(type, &size));
  return count * size;
}

}  // namespace

void watched_allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                       std::string_view label, std::string_view group) {
  MPI_Request request = MPI_REQUEST_NULL;
  FSDPC_MPI_CHECK(MPI_Iallreduce(send, recv, count, type, op, comm, &request));
  wait_recorded(&request, {"all_reduce", label, "", group, comm, count, watched_dtype(type), type_bytes(type, count)});
}

void watched_allgather(const void* send, int count, MPI_Datatype type, void* recv, MPI_Comm comm,
                       std::string_view label, std::string_view group) {
  MPI_Request request = MPI_REQUEST_NULL;
  FSDPC_MPI_CHECK(MPI_Iallgather(send, count, type, recv, count, type, comm, &request));
  int ranks = 0;
  FSDPC_MPI_CHECK(MPI_Comm_size(comm, &ranks));
  wait_recorded(&request, {"all_gather", label, "", group, comm, count, watched_dtype(type),
                           type_bytes(type, static_cast<int64_t>(count) * ranks)});
}

void watched_bcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm, std::string_view label,
                   std::string_view group) {
  MPI_Request request = MPI_REQUEST_NULL;
  FSDPC_MPI_CHECK(MPI_Ibcast(buffer, count, type, root, comm, &request));
  wait_recorded(&request, {"broadcast", label, "", group, comm, count, watched_dtype(type), type_bytes(type, count)});
}

void watched_barrier(MPI_Comm comm, std::string_view label, std::string_view group) {
  MPI_Request request = MPI_REQUEST_NULL;
  FSDPC_MPI_CHECK(MPI_Ibarrier(comm, &request));
  wait_recorded(&request, {"barrier", label, "", group, comm, 0, "", 0});
}

double parse_timeout_seconds(const std::string& text, const std::string& source) {
  char* end = nullptr;
  const double s = text.empty() ? 0 : std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(s) || s <= 0)
    fail(source, " '", text, "': expected a positive number of seconds, such as 600 or 2.5");
  return s;
}

void set_collective_timeout(double seconds) {
  FSDPC_CHECK(seconds > 0 && std::isfinite(seconds)) << "timeout " << seconds;
  g_timeout_s = seconds;
}

double collective_timeout() {
  if (g_timeout_s > 0) return g_timeout_s;
  for (const char* name : {"FSDPC_TIMEOUT_S", "FSDPC_NCCL_TIMEOUT_S"})
    if (const char* v = std::getenv(name); v && *v) return parse_timeout_seconds(v, name);
  return 600.0;
}

std::string mesh_description(const Mesh& mesh) {
  if (mesh.tp > 1) {
    Mesh dp = mesh;
    dp.tp = 1;
    return mesh_description(dp) + " x " + std::to_string(mesh.tp) + " tensor-parallel ranks";
  }
  if (mesh.replicas == 1) return "flat mesh of " + std::to_string(mesh.world()) + " ranks";
  return std::to_string(mesh.replicas) + "x" + std::to_string(mesh.shards) + " mesh (replicas x shards)";
}

ProcessGroups::ProcessGroups(const Mesh& mesh) : mesh_(mesh) {
  const int world = mpi_world_size();
  // Checked before any collective call: every rank sees the same sizes and
  // throws together, so none is left waiting in MPI_Comm_split.
  if (mesh.replicas < 1 || mesh.shards < 1 || mesh.tp < 1 || mesh.world() != world)
    fail("the ", mesh_description(mesh), " needs ", mesh.world(), " processes, mpirun started ",
         world, " (launch with mpirun -np ", mesh.world(), ")");
  rank_ = mpi_world_rank();
  for (const char* name : kGroupNames) groups_.push_back({name, make_comm(mesh_, name, rank_)});
}

ProcessGroups::~ProcessGroups() { free_all(); }

ProcessGroups::ProcessGroups(ProcessGroups&& o) noexcept
    : mesh_(o.mesh_), rank_(o.rank_), groups_(std::exchange(o.groups_, {})) {}

ProcessGroups& ProcessGroups::operator=(ProcessGroups&& o) noexcept {
  if (this != &o) {
    free_all();
    mesh_ = o.mesh_;
    rank_ = o.rank_;
    groups_ = std::exchange(o.groups_, {});
  }
  return *this;
}

void ProcessGroups::free_all() {
  // A static ProcessGroups may outlive the atexit MPI_Finalize; its
  // communicators died with MPI then.
  if (!groups_.empty() && !mpi_finalized())
    for (Group& g : groups_) FSDPC_MPI_CHECK(MPI_Comm_free(&g.comm));
  groups_.clear();
}

MPI_Comm ProcessGroups::comm(const std::string& name) const {
  for (const Group& g : groups_)
    if (g.name == name) return g.comm;
  mesh_.group_size(name);  // throws the unknown-group error
  FSDPC_CHECK(false) << "no communicator for group " << name;
  return MPI_COMM_NULL;
}

int ProcessGroups::size(const std::string& name) const {
  int size = 0;
  FSDPC_MPI_CHECK(MPI_Comm_size(comm(name), &size));
  return size;
}

int ProcessGroups::rank_in(const std::string& name) const {
  int rank = 0;
  FSDPC_MPI_CHECK(MPI_Comm_rank(comm(name), &rank));
  return rank;
}

}  // namespace fsdpc
