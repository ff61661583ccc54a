// The collective watchdog of `fsdpc train`: it bounds every wait for a
// collective by a timeout (--timeout), keeps the flight recorder of the
// rank's collectives, and writes it on a timeout, on a fatal error, and
// when SIGUSR1 asks (at a safe point: inside a blocked wait, or between
// steps; never in the signal handler). On a timeout it names the collective,
// writes the recorder and takes every rank down with MPI_Abort.
#pragma once

#include <string>

#include "executors/comm/mpi_world.h"
#include "runtime/reliability/flight_recorder.h"

namespace fsdpc {

// The exit code of a job whose collective timed out (MPI_Abort's, which
// mpirun passes on): distinct from a user's mistake (2) and from
// timeout(1)'s 124, which a launcher's own time limit gives.
constexpr int kCollectiveTimeoutExit = 4;

struct WatchdogOptions {
  double timeout_s = 600;
  std::string flight_dir = "fsdpc-flight";  // where flight-rank{R}.json go
  int rank = 0, world = 1;
};

class Watchdog final : public CollectiveWatch {
 public:
  explicit Watchdog(WatchdogOptions options) : options_(std::move(options)) {}

  uint64_t issued(const CollectiveInfo& c) override { return recorder_.issued(c); }
  void completed(uint64_t id) override { recorder_.completed(id); }
  void waiting() override { safe_point(); }
  [[noreturn]] void expired(uint64_t id, double waited_s) override;
  double timeout_s() const override { return options_.timeout_s; }

  // Writes the flight recorder when a SIGUSR1 arrived since the last call.
  void safe_point();
  // Writes the flight recorder now; returns its path ("" if it failed).
  std::string dump(const std::string& reason);
  const FlightRecorder& recorder() const { return recorder_; }
  const WatchdogOptions& options() const { return options_; }

 private:
  WatchdogOptions options_;
  FlightRecorder recorder_;
};

// Makes one Watchdog for the process and the collective watch of every MPI
// wait (mpi_world.h), and sets the collective timeout (the NCCL context
// reads it too). Later calls replace its options. Call after mpi_init().
Watchdog& install_watchdog(const WatchdogOptions& options);
// The installed watchdog, or null.
Watchdog* installed_watchdog();
// Writes the flight recorder because `what` ends the run, if a watchdog is
// installed and some collective ran (an error before the first one has
// nothing to diagnose); returns its path, or "".
std::string dump_flight_on_error(const std::string& what);

}  // namespace fsdpc
