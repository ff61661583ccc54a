// The link probe: the link between this MPI world's ranks, measured through
// the runtime's collectives as the step simulator reads it (latency, each
// collective's bandwidth, and the host time a collective in flight costs the
// compute stream). runtime/planner/link_probe.cpp says how each is measured.
#pragma once

#include <cstdint>
#include <string>

namespace fsdpc {

// Collective over MPI_COMM_WORLD (at least 2 ranks; MPI is initialised here
// if it is not yet). `large_bytes`: the large collectives' buffers. Returns
// rank 0's JSON object, one line; "" on the other ranks.
std::string link_probe(int64_t large_bytes);

}  // namespace fsdpc
