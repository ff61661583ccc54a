// The flight report: every rank's flight recorder dump of a run
// (flight-rank{R}.json in its --flight-dir, runtime/reliability/
// flight_recorder.h) read together, naming the first collective, in each
// communicator's own order, on which the ranks part ways: issued differently
// (op, statement or count), issued by some ranks and never by others, or
// issued and never completed; and the ranks that left no file.
#pragma once

#include <string>

namespace fsdpc {

// The report's lines ("all N ranks agree: ..." when nothing parts). An
// fsdpc::Error names the folder or file when one cannot be read or is not
// a flight recorder dump.
std::string flight_report(const std::string& dir);

}  // namespace fsdpc
