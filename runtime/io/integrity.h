// Checkpoint integrity: a SHA-256 per file, recorded when a checkpoint is
// written and verified before it is loaded, so a flipped byte in a shard is
// refused by name instead of trained on. Hashing is shared out over the
// ranks; the results are agreed collectively, so every rank sees the same.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace fsdpc {

// Collective over MPI_COMM_WORLD: each rank hashes its own `file`; every
// rank gets all ranks' hex digests, in rank order.
std::vector<std::string> gather_file_digests(const std::string& file);

// Collective over MPI_COMM_WORLD: checks <dir>/<name> against each recorded
// digest, rank r hashing every world-th file from the r-th. Returns "" when
// all match; otherwise a message naming the first missing or changed file
// (`recorded_in` says where the digests came from), the same on every rank.
std::string verify_file_digests(const std::string& dir, const std::map<std::string, std::string>& digests,
                                const std::string& recorded_in);

// The "sha256" object ({file: hex}) of a checkpoint's index.json; {} when
// the index records none (checkpoints written before digests were). An
// unreadable or malformed index is an fsdpc::Error.
std::map<std::string, std::string> read_index_digests(const std::string& index_json);

// SHA256SUMS in sha256sum's format ("<hex>  <name>" lines), so that
// `sha256sum -c SHA256SUMS` checks a folder too. Reading a missing file
// gives {}; a malformed line is an fsdpc::Error.
std::string sha256sums_text(const std::map<std::string, std::string>& digests);
std::map<std::string, std::string> read_sha256sums(const std::string& path);

}  // namespace fsdpc
