// Elides statements that hand their input on unchanged: a collective over a
// group of one rank together with its wait, and a division by exactly 1.
// At world size 1 (or on a mesh dimension of size 1) FSDP's gathers,
// gradient reductions and 1/N scaling are all identities; left in, each
// copied every parameter and gradient once a step (gpt2: 1 GB a step).
#pragma once

#include "ir/trace.h"

namespace fsdpc {

// Removes every top-level all_gather, reduce_scatter, all_reduce and
// broadcast whose `size` attribute is 1 and whose future has exactly one
// use, a wait; the wait's output is renamed to the collective's input in
// later statements and in the returns. Removes every `div(x, 1.0)` whose
// output has x's type (the literal must be exactly 1; a division that
// promotes or broadcasts stays) the same way. What an elided all_gather
// read (a parameter, or its cast) is retyped replicated: a shard over one
// rank is the whole value. Everything else is kept in order. Any order of the collectives a schedule chose is unaffected, since
// the only statements removed are ones that do nothing.
//
// Pre:  verify(trace) passes; no `del` yet (the del pass runs later).
// Post: verify() passes; no collective of size 1 and no division by 1
//       remains; provenance "elide" (the stage's name).
//
//   # t_w: fully_sharded                            # t_w: replicated
//   ft9 = all_gather(t_w, group=dp, size=1, dim=0)
//   t7 = wait(ft9)                                   ==>   t0 = linear(x, t_w)
//   t0 = linear(x, t7)
//
// With options.collectives off, the collectives and their waits all stay
// and only the divisions by 1 go: a world of one then runs every
// collective a larger world would (over one rank), which is how the
// collective paths (NCCL on one GPU, its staging, streams and watchdog) are
// exercised where only one device is at hand.
struct ElideOptions {
  bool collectives = true;  // drop collectives over one rank with their waits
};
Trace elide_identities(const Trace& trace, const ElideOptions& options = {});

}  // namespace fsdpc
