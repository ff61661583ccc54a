// Stop signals: async-signal-safe handlers (a lock-free atomic, _exit) and
// one MPI_Allreduce(MAX) per step to agree; SIGUSR1 only counts dump requests.
#include "runtime/reliability/preemption.h"

#include <mpi.h>
#include <unistd.h>

#include <atomic>
#include <csignal>

#include "executors/comm/mpi_world.h"
#include "ir/error.h"

namespace fsdpc {

namespace {

std::atomic<int> g_signal{0};
std::atomic<int> g_dump_requests{0};  // SIGUSR1s not yet served
static_assert(std::atomic<int>::is_always_lock_free, "the handler may only touch a lock-free atomic");

extern "C" void on_dump_signal(int) { g_dump_requests.fetch_add(1); }

extern "C" void on_stop_signal(int sig) {
  int expected = 0;
  if (g_signal.compare_exchange_strong(expected, sig)) return;
  // Asked again: a second Ctrl-C means now. (mpirun answers a Ctrl-C by
  // sending SIGTERM to its ranks, which must not count as a second one.)
  if (sig == SIGINT && expected == SIGINT) _exit(128 + SIGINT);
}

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // MPI's and the file system's calls carry on
  for (int sig : {SIGTERM, SIGINT}) FSDPC_CHECK(sigaction(sig, &sa, nullptr) == 0) << "sigaction";
  sa.sa_handler = on_dump_signal;
  FSDPC_CHECK(sigaction(SIGUSR1, &sa, nullptr) == 0) << "sigaction";
}

int stop_signal() { return g_signal.load(); }

const char* stop_signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "a signal";
  }
}

bool take_flight_dump_request() { return g_dump_requests.exchange(0) > 0; }

int agree_on_stop() {
  int mine = stop_signal(), any = 0;
  watched_allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, "stop agreement", "world");
  return any;
}

}  // namespace fsdpc
