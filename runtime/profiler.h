// The step timeline (fsdpc train --profile): one rank's record of what ran
// when, written as Chrome trace-event JSON (Perfetto, chrome://tracing).
//
// Tracks, per rank (one trace "process" each):
// - step: each profiled step, and inside it the engine's phases (forward,
//   backward, clip, optimizer);
// - compute: every kernel the interpreter ran, named by statement and op,
//   with FLOPs and bytes (the step simulator's cost model);
// - communication: every collective from its issue to the moment the rank
//   saw it complete (MPI_Test between kernels, or its wait), on lanes so
//   collectives in flight together do not overlap on one track;
// - wait: the time the rank sat blocked in waits (exposed communication);
// - live memory: a counter per allocator category, after each statement.
//
// Cost. The hooks (interpreter, engine, MPI executor) are one branch on a
// null pointer when profiling is off; fsdpc train attaches the profiler only
// for the profiled steps. When on, events are fixed-size records appended to
// a vector reserved up front: names are copied into fixed arrays or resolved
// from the statement when the file is written.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "executors/comm/mpi_executor.h"
#include "executors/executor.h"
#include "ir/trace.h"
#include "runtime/allocator.h"

namespace fsdpc {

enum class ProfileTrack : uint8_t { step, compute, communication, wait };

struct ProfileEvent {
  using Name = std::array<char, 48>;
  int64_t begin_ns = 0, end_ns = -1;  // since the profiler's origin; -1: not complete
  ProfileTrack track = ProfileTrack::step;
  bool issue = false;                      // compute: a collective's issue
  bool progress = false;                   // compute: polling collectives (MpiContext::progress)
  const BoundSymbol* statement = nullptr;  // compute and wait: named from it when written
  Name name{};                             // step and communication: copied
  std::array<char, 16> op{}, group{};      // communication
  int32_t ranks = -1;                      // communication: index into the ranks lists
  double flops = 0, bytes = 0;
};

struct ProfileCounter {
  int64_t at_ns = 0;
  std::array<int64_t, kNumMemCategories> live{};
};

// Where the profiled steps' time went on one rank, in seconds summed over
// those steps. The parts add up to `step`; `other` is what no track claims
// (issuing collectives, host copies, gradient accumulation, allocation, the
// interpreter's own work). `in_flight` is the time some collective was in
// flight (the union of their spans): 1 - exposed/in_flight of it was hidden
// behind other work.
struct StepBreakdown {
  int steps = 0;
  double step = 0, matmul = 0, other_compute = 0, exposed = 0, optimizer = 0, other = 0, in_flight = 0;
  double progress = 0;  // of `other`: polling collectives between kernels
  double hidden_share() const;
};

class Profiler final : public CollectiveTimeline {
 public:
  using Clock = std::chrono::steady_clock;

  // Collective over `world` (every rank makes one at the same point): a
  // barrier sets the common origin. On one host every rank takes rank 0's
  // reading of the shared monotonic clock, so the ranks' times are exactly
  // comparable; across hosts each takes its own barrier exit (skew: the
  // barrier's, microseconds on a fast network). Bounded by the watchdog.
  explicit Profiler(MPI_Comm world, size_t reserve_events = 1 << 16);

  int64_t since_origin(Clock::time_point t) const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t - origin_).count();
  }

  // A kernel of the interpreter (`in`: its input views, for FLOPs and bytes).
  void kernel(const BoundSymbol& b, const std::vector<TensorView>& in, Clock::time_point begin,
              Clock::time_point end);
  // A span on the step track ("step 3", "forward") or, for the runtime's own
  // blocking collectives, on both communication and wait tracks.
  void span(ProfileTrack track, std::string_view name, Clock::time_point begin, Clock::time_point end);
  void blocking_collective(std::string_view op, std::string_view label, std::string_view group, MPI_Comm comm,
                           int64_t bytes, Clock::time_point begin, Clock::time_point end);
  // The rank polling its collectives between kernels (MpiContext::progress):
  // on the compute track when it took long enough to see (an oversubscribed
  // MPI yields the core there), always counted in the breakdown.
  void progress(Clock::time_point begin, Clock::time_point end);
  // The allocator's live bytes now; recorded when they changed.
  void memory(const MemStats& stats, Clock::time_point at);

  // CollectiveTimeline: the MPI executor's collectives.
  uint32_t collective_issued(const CollectiveInfo& c) override;
  void collective_completed(uint32_t id) override;

  void count_step() { ++steps_; }
  int steps() const { return steps_; }
  StepBreakdown breakdown() const;
  // This rank's events as comma-separated trace-event objects, pid = rank.
  std::string events_json(int rank) const;
  size_t event_count() const { return events_.size(); }

 private:
  int32_t ranks_of(MPI_Comm comm);
  void add(ProfileEvent e);

  Clock::time_point origin_;
  std::vector<ProfileEvent> events_;
  std::vector<ProfileCounter> counters_;
  std::vector<std::pair<MPI_Comm, std::string>> ranks_;  // a communicator's world ranks, "0,1"
  std::vector<const TensorType*> input_types_;  // reused: no allocation per kernel
  int steps_ = 0;
  double progress_s_ = 0;  // every progress() call's time, shown or not
};

// A span on the step track from construction to end() (or destruction),
// recorded when `profiler` is not null; otherwise it reads no clock.
class ProfileSpan {
 public:
  ProfileSpan(Profiler* profiler, const char* name) : profiler_(profiler), name_(name) {
    if (profiler_) begin_ = Profiler::Clock::now();
  }
  ~ProfileSpan() { end(); }
  ProfileSpan(const ProfileSpan&) = delete;
  ProfileSpan& operator=(const ProfileSpan&) = delete;
  void end() {
    if (profiler_) profiler_->span(ProfileTrack::step, name_, begin_, Profiler::Clock::now());
    profiler_ = nullptr;
  }

 private:
  Profiler* profiler_;
  const char* name_;
  Profiler::Clock::time_point begin_;
};

// Collective over `world`: rank 0 gathers every rank's events (bounded by
// the watchdog) and writes one trace file to `path`, atomically (a temporary
// file renamed into place). Every rank returns "" on success, or rank 0's
// error message (every rank gets it, so all can stop together).
std::string write_profile(const Profiler& profiler, const std::string& path, MPI_Comm world,
                          const std::string& description);

// Every rank's breakdown on every rank (a gather of a few numbers, bounded).
std::vector<StepBreakdown> gather_breakdowns(const StepBreakdown& mine, MPI_Comm world);

}  // namespace fsdpc
