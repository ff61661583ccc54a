// What every fsdpc command shares: reading a trace file, rendering a trace in
// the requested form and writing output without ever leaving a partial file.
#pragma once

#include <string>
#include <vector>

#include "ir/mesh.h"
#include "ir/trace.h"

namespace fsdpc::cli {

// The whole file, or standard input for "-"; fsdpc::Error naming the path.
std::string read_input(const std::string& path);
// Parses a trace in text or JSON form (by its first character) and verifies it.
Trace load_trace(const std::string& path);
// Writes to standard output for "" or "-", else to a sibling temporary file
// renamed over `path`.
void write_output(const std::string& path, const std::string& text);

// "R,S" -> a mesh of R replicas of S-way sharding; fsdpc::Error otherwise.
Mesh parse_mesh(const std::string& text);

// The output forms: text, json, dot, mlir.
const std::vector<std::string>& formats();
std::string render(const Trace& trace, const std::string& format);

}  // namespace fsdpc::cli
