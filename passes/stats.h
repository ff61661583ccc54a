// Communication volume and memory footprint of a trace, read off the IR:
// what `fsdpc stats` prints and what tests pin down for each strategy.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "ir/trace.h"

namespace fsdpc {

// Count and bytes one rank sends (= receives) for one kind of collective,
// under the ring-algorithm convention the ZeRO paper uses; each collective's
// formula sits beside its case in stats.cpp. Bytes are doubles: S * (n-1)/n
// is fractional when n does not divide S.
struct CollectiveStats {
  int64_t count = 0;
  double bytes = 0;
};

struct TraceStats {
  // Keyed by op, so that a new collective needs no field here: every op of
  // the table with the `issue` trait has an entry, zero where none ran.
  // Group collectives (all_gather, reduce_scatter, all_reduce, broadcast)
  // count a ring's bytes sent per rank; the p2p ones (send, recv) a
  // pipeline stage's transfers, a send's bytes sent, a recv's received.
  std::map<OpId, CollectiveStats> by_op;
  const CollectiveStats& of(OpId op) const;  // fails for an op without `issue`

  int64_t collective_count = 0;  // the group collectives together
  double collective_bytes = 0;
  // synchronize is a collective not yet lowered (autodiff lowers it); it is
  // counted but carries no bytes, since which collective it becomes depends
  // on the direction.
  int64_t synchronize_count = 0;

  // Memory, per rank (shapes are local: a shard's shape is the shard's).
  // A value's bytes are numel * dtype_size. Arguments are live from the
  // start; each statement's outputs become live when defined (a future when
  // its collective is issued; its wait's output is that same buffer, so the
  // wait adds nothing) and stop being live at the `del` naming them.
  // Sub-symbols are a composite's internals and are not counted.
  int64_t arg_bytes = 0;    // every argument, parameters included
  int64_t param_bytes = 0;  // the arguments that are parameters
  int64_t peak_live_bytes = 0;
  int64_t peak_statement = 0;   // statement number (1-based, as verify() counts); 0: at entry
  int64_t end_live_bytes = 0;   // live at the return
  // Without any del nothing is freed, so the peak is the sum of all buffers:
  // the upper bound a runtime that never frees would reach.
  bool has_dels = false;
};

TraceStats trace_stats(const Trace& trace);
std::string stats_json(const TraceStats& stats);  // one JSON object, 2-space indent
std::string stats_text(const TraceStats& stats);  // a short table for people

}  // namespace fsdpc
