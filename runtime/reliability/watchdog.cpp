// The watchdog's reports: a timed-out collective's message, then the flight
// recorder, then MPI_Abort; SIGUSR1 and fatal-error dumps.
#include "runtime/reliability/watchdog.h"

#include <cstdio>
#include <sstream>

#include "ir/error.h"
#include "runtime/reliability/preemption.h"

namespace fsdpc {

namespace {

Watchdog* g_watchdog = nullptr;  // never destroyed: waits may run during exit

// A failed FSDPC_CHECK (a bug) writes the recorder before it aborts, as an
// error that ends training does; FSDPC_CHECK calls this after printing.
void dump_on_check_failure(const char* message) {
  const std::string flight = dump_flight_on_error(message);
  if (!flight.empty())
    std::fprintf(stderr, "fsdpc: rank %d: flight recorder written to %s\n", g_watchdog->options().rank, flight.c_str());
}

std::string rank_list(const std::vector<int>& ranks, int except) {
  std::string out;
  for (int r : ranks)
    if (r != except) out += (out.empty() ? "" : ",") + std::to_string(r);
  return out.empty() ? "none" : out;
}

}  // namespace

void Watchdog::expired(uint64_t id, double waited_s) {
  std::fflush(stdout);
  std::ostringstream msg;
  msg.precision(3);
  msg << "fsdpc: error: rank " << options_.rank << ": a collective timed out after " << waited_s
      << " s (--timeout " << options_.timeout_s << "): ";
  if (const FlightEntry* e = recorder_.find(id)) {
    const FlightGroup& g = recorder_.groups().at(e->group);
    msg << "`" << e->statement << "` (" << e->op << " on group " << g.name << " of ranks "
        << rank_list(g.ranks, -1) << ", collective #" << e->group_seq << " there; ";
    if (!e->dtype.empty()) msg << e->count << " x " << e->dtype << ", ";
    msg << e->bytes << " bytes). Not completed with rank" << (g.ranks.size() > 2 ? "s " : " ")
        << rank_list(g.ranks, options_.rank)
        << " (MPI does not say which of them never arrived; `fsdpc flight DIR` compares every rank's recorder)";
  } else {
    msg << "collective #" << id << " (no longer in the flight recorder)";
  }
  std::fprintf(stderr, "%s\n", msg.str().c_str());
  std::fflush(stderr);
  const std::string path = dump("timeout");
  std::fprintf(stderr, "fsdpc: rank %d: flight recorder written to %s; aborting every rank (exit %d)\n",
               options_.rank, path.empty() ? "(nowhere)" : path.c_str(), kCollectiveTimeoutExit);
  std::fflush(stderr);
  mpi_abort(kCollectiveTimeoutExit);
}

void Watchdog::safe_point() {
  if (!take_flight_dump_request()) return;
  const std::string path = dump("SIGUSR1");
  if (!path.empty()) std::fprintf(stderr, "fsdpc: rank %d: flight recorder written to %s (SIGUSR1)\n", options_.rank, path.c_str());
  std::fflush(stderr);
}

std::string Watchdog::dump(const std::string& reason) {
  return recorder_.write(options_.flight_dir, options_.rank, options_.world, reason);
}

Watchdog& install_watchdog(const WatchdogOptions& options) {
  if (!g_watchdog) g_watchdog = new Watchdog(options);
  else *g_watchdog = Watchdog(options);
  set_collective_timeout(options.timeout_s);
  set_collective_watch(g_watchdog);
  set_check_failure_hook(&dump_on_check_failure);
  return *g_watchdog;
}

Watchdog* installed_watchdog() { return g_watchdog; }

std::string dump_flight_on_error(const std::string& what) {
  if (!g_watchdog || g_watchdog->recorder().total() == 0) return "";
  return g_watchdog->dump("error: " + what);
}

}  // namespace fsdpc
