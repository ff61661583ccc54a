// The flight recorder: each rank's last kFlightEntries collectives (what,
// on which group, how big, when issued and completed), kept in a ring buffer
// so that a hang can be diagnosed after the fact from every rank's dump
// (`fsdpc flight DIR`, runtime/reliability/flight_report.h). Recording copies into
// fixed storage: no allocation per collective, only the first use of a
// communicator registers its group.
#pragma once

#include <mpi.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "executors/comm/mpi_world.h"

namespace fsdpc {

constexpr size_t kFlightEntries = 1024;

enum class FlightState : uint8_t { issued, completed };

struct FlightEntry {
  uint64_t seq = 0;        // this rank's count of collectives before this one
  uint64_t group_seq = 0;  // the same, on its communicator (how MPI matches them)
  uint32_t group = 0;      // index into FlightRecorder::groups()
  std::string_view op;     // a static name ("all_gather")
  std::string_view dtype;  // a static name ("f32"), empty for a barrier
  char statement[96] = {};  // "ft9 = all_gather(t_0_weight)", or the runtime's label
  int64_t count = 0;
  int64_t bytes = 0;
  int64_t issued_ns = 0, completed_ns = 0;  // steady clock
  FlightState state = FlightState::issued;
};

// A communicator as the recorder names it: its group's name and members
// (world ranks, in the communicator's order), and how many collectives this
// rank issued on it.
struct FlightGroup {
  std::string name;
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<int> ranks;
  uint64_t issued = 0;
};

class FlightRecorder {
 public:
  // Returns the entry's seq (what completed() takes).
  uint64_t issued(const CollectiveInfo& c);
  void completed(uint64_t seq);

  // Kept entries, oldest first; the entry of `seq` if still kept.
  std::vector<FlightEntry> entries() const;
  const FlightEntry* find(uint64_t seq) const;
  const std::vector<FlightGroup>& groups() const { return groups_; }
  uint64_t total() const { return next_seq_; }

  // The dump: {"fsdpc_flight": 1, "rank", "world", "reason", "written_at",
  // "groups": [{name, ranks, issued}], "collectives": [{seq, group,
  // group_seq, op, statement, count, dtype, bytes, issued_at, completed_at,
  // state}]}, times in seconds since the Unix epoch (comparable across
  // ranks as far as their clocks agree), completed_at null while issued.
  std::string to_json(int rank, int world, const std::string& reason) const;
  // Writes to_json() to DIR/flight-rank{rank}.json (a temporary file renamed
  // into place; the folder is created). Returns the path, or "" with a
  // message on stderr when it cannot be written: a dump runs when things
  // already went wrong, and must not hide why.
  std::string write(const std::string& dir, int rank, int world, const std::string& reason) const;

 private:
  uint32_t group_of(const CollectiveInfo& c);

  std::array<FlightEntry, kFlightEntries> ring_{};
  uint64_t next_seq_ = 0;
  std::vector<FlightGroup> groups_;
};

}  // namespace fsdpc
