// The reference executor: a float64 interpreter of any trace, the oracle for
// gradient checks and for every fast executor. Simple and slow on purpose.
// Collectives are simulated: run_spmd() steps every rank of a mesh through
// the same trace in lockstep and combines values across each process group.
#pragma once

#include <deque>
#include <map>
#include <tuple>
#include <vector>

#include "ir/mesh.h"
#include "ir/trace.h"

namespace fsdpc::reference {

// A tensor value. Data is float64 for every dtype (integers and bools are
// held exactly); `type` is the proxy's type (futures included).
struct Value {
  TensorType type;
  std::vector<double> data;  // row-major, numel(type.shape) elements
};

Value make_value(TensorType type, std::vector<double> data);  // checks the size

// Point-to-point messages between SPMD runs of different traces (pipeline
// stages): `position` is the position in every send/recv group of the run
// about to start; send appends its value to the queue (position -> peer,
// local rank), recv takes the oldest of (peer -> position, local rank).
struct Mailbox {
  int position = 0;
  std::map<std::tuple<int, int, int>, std::deque<Value>> queues;  // (from, to, local rank)
};

// Runs `trace` on every rank of `mesh`; args[r] are rank r's arguments, in
// trace.args order, and must match their proxies' shapes. Returns each rank's
// returned values, the return tree flattened left to right. A composite runs
// its decomposition (its sub-symbols) when it has one and is computed
// directly when it has none. Throws fsdpc::Error on
// a bad argument count or shape, or on a collective whose `size` attribute
// does not match its group on the mesh.
std::vector<std::vector<Value>> run_spmd(const Trace& trace, const Mesh& mesh,
                                         const std::vector<std::vector<Value>>& args);
// The same, with send and recv going through `mailbox` (may be null when the
// trace has neither). A stage's group (pp) is not part of its Mesh, so their
// `size` is not checked against it; the local rank is the rank on `mesh`.
// Throws fsdpc::Error on send or recv without a mailbox, a peer equal to
// mailbox->position, a recv with no message waiting, and a message whose
// shape or dtype differs from the recv's.
std::vector<std::vector<Value>> run_spmd(const Trace& trace, const Mesh& mesh,
                                         const std::vector<std::vector<Value>>& args, Mailbox* mailbox);

// A world of one.
std::vector<Value> run(const Trace& trace, const std::vector<Value>& args);

}  // namespace fsdpc::reference
