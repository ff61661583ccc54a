// What every fsdpc command shares: reading a trace file and writing output
// without ever leaving a partial file (a trace in the requested form:
// passes/render.h).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "executors/claim.h"
#include "ir/mesh.h"
#include "ir/target.h"
#include "ir/trace.h"
#include "passes/fuse_head.h"
#include "passes/remat.h"

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

// --mem-cap's size: a positive number with an optional unit B, K, M or G
// (powers of 1024): "512M", "2G", "1.5G"; fsdpc::Error naming the flag otherwise.
int64_t parse_mem_cap(const std::string& text);
// A size with an optional unit B, K, M or G (powers of 1024): "512M", "2G".
// `option` names the flag in messages.
int64_t parse_byte_size(const std::string& option, const std::string& text);
// --remat: none | block | selective | auto | auto:BYTES.
RematOptions parse_remat(const std::string& text);
// --loss-chunk: auto | ROWS (a whole number >= 1) | off (passes/fuse_head.h).
LossChunk parse_loss_chunk(const std::string& text);
// The --loss-chunk option itself, shared by train, dump and advise.
void add_loss_chunk_option(CLI::App* cmd, std::string& value);

// --executor and --fusion, the edge where their spellings become enums:
// fsdpc::Error naming the flag, the value and the spellings otherwise
// ("--executor 'tpu': expected cpu, cuda or auto").
TargetRequest parse_executor(const std::string& text);
FusionMode parse_fusion(const std::string& text);
// The two options themselves, shared by train and dump; the values stay text
// until those parse them (advise's --executor takes no auto: its own).
void add_target_options(CLI::App* cmd, std::string& executor, std::string& fusion);

// Numeric flag checks whose message says what is expected: CLI11's
// PositiveNumber and NonNegativeNumber print the whole double range (a
// 300-digit number) when a value is out of it.
// A whole number in [lo, hi]: "--steps: '0' is not a whole number from 1 to 2147483647".
CLI::Validator whole_number(int64_t lo, int64_t hi = std::numeric_limits<int>::max());
// A finite number above `lo` (or at least `lo` with lo_inclusive), and below
// `hi` (or at most `hi` with hi_inclusive; infinity: no upper bound).
CLI::Validator real_number(double lo, bool lo_inclusive, double hi = std::numeric_limits<double>::infinity(),
                           bool hi_inclusive = false);

}  // namespace fsdpc::cli
