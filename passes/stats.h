// Communication volume and memory footprint of a trace, read off the IR:
// what `fsdpc stats` prints and what tests pin down for each strategy.
#pragma once

#include <cstdint>
#include <string>

#include "ir/trace.h"

namespace fsdpc {

// Count and bytes one rank sends (= receives) for one kind of collective,
// under the ring-algorithm convention the ZeRO paper uses, for a group of n
// ranks (the op's `size`):
//   all_gather      output O bytes:  O * (n-1)/n
//   reduce_scatter  input  I bytes:  I * (n-1)/n
//   all_reduce      S bytes:         2 * S * (n-1)/n  (reduce_scatter + all_gather)
//   broadcast       S bytes:         S * (n-1)/n      (pipelined chunks)
// Bytes are doubles: S * (n-1)/n is fractional when n does not divide S.
struct CollectiveStats {
  int64_t count = 0;
  double bytes = 0;
};

struct TraceStats {
  CollectiveStats all_gather, reduce_scatter, all_reduce, broadcast;
  int64_t collective_count = 0;  // the four kinds together
  double collective_bytes = 0;
  // synchronize is a collective not yet lowered (autodiff lowers it); it is
  // counted but carries no bytes, since which collective it becomes depends
  // on the direction.
  int64_t synchronize_count = 0;
  // Pipeline stages' point-to-point transfers, kept apart from the four
  // collectives: a send's bytes are sent by this rank, a recv's received.
  CollectiveStats send, recv;

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
