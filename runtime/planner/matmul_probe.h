// The matmul probe: matmul statements timed on every rank of an MPI world
// at once, as a step's ranks run them (runtime/planner/matmul_probe.cpp).
#pragma once

#include <string>
#include <vector>

#include "runtime/planner/planner.h"

namespace fsdpc {

// The samples as matmul_probe() reads them: one JSON trace a line, its one
// statement's inputs as arguments.
std::string matmul_probe_input(const std::vector<MatmulSample>& samples);

// Collective over MPI_COMM_WORLD (MPI is initialised here if it is not yet):
// times each statement of the file `traces` (matmul_probe_input's lines).
// Returns rank 0's JSON, {"call": s, "seconds": [s, ...]}; "" elsewhere.
std::string matmul_probe(const std::string& traces);

}  // namespace fsdpc
