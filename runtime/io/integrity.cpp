// Recording and verifying per-file SHA-256 digests of checkpoints.
#include "runtime/io/integrity.h"

#include <mpi.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "executors/comm/mpi_world.h"
#include "ir/error.h"
#include "runtime/io/sha256.h"

namespace fsdpc {

namespace fs = std::filesystem;

std::vector<std::string> gather_file_digests(const std::string& file) {
  const int world = mpi_world_size();
  const std::string mine = sha256_file_hex(file);
  std::string all(64 * static_cast<size_t>(world), '\0');
  watched_allgather(mine.data(), 64, MPI_CHAR, all.data(), MPI_COMM_WORLD, "checkpoint digests", "world");
  std::vector<std::string> out;
  for (int r = 0; r < world; ++r) out.push_back(all.substr(64 * static_cast<size_t>(r), 64));
  return out;
}

std::string verify_file_digests(const std::string& dir, const std::map<std::string, std::string>& digests,
                                const std::string& recorded_in) {
  const int world = mpi_world_size(), rank = mpi_world_rank();
  enum : int { kOk = 0, kChanged = 1, kMissing = 2 };
  std::vector<int> mine(digests.size(), kOk), all(digests.size(), kOk);
  size_t i = 0;
  for (const auto& [name, digest] : digests) {
    const fs::path path = fs::path(dir) / name;
    if (static_cast<int>(i % static_cast<size_t>(world)) == rank) {
      std::error_code ec;
      if (!fs::is_regular_file(path, ec)) mine[i] = kMissing;
      else if (sha256_file_hex(path.string()) != digest) mine[i] = kChanged;
    }
    ++i;
  }
  if (!mine.empty())
    watched_allreduce(mine.data(), all.data(), static_cast<int>(mine.size()), MPI_INT, MPI_MAX, MPI_COMM_WORLD,
                      "checkpoint verification", "world");
  i = 0;
  for (const auto& [name, digest] : digests) {
    const std::string path = (fs::path(dir) / name).string();
    if (all[i] == kMissing) return path + ": missing, but " + recorded_in + " lists it";
    if (all[i] == kChanged)
      return path + ": corrupted: its SHA-256 differs from the one " + recorded_in +
             " records (the file changed after it was saved); refusing to load it";
    ++i;
  }
  return "";
}

std::map<std::string, std::string> read_index_digests(const std::string& index_json) {
  std::ifstream in(index_json);
  if (!in) fail(index_json, ": cannot open for reading");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) fail(index_json, ": not a JSON object");
  std::map<std::string, std::string> out;
  if (!j.contains("sha256")) return out;
  const nlohmann::json& d = j["sha256"];
  if (!d.is_object()) fail(index_json, ": \"sha256\" must map file names to hex digests");
  for (const auto& [name, hex] : d.items()) {
    if (!hex.is_string() || hex.get<std::string>().size() != 64 || name.find('/') != std::string::npos)
      fail(index_json, ": \"sha256\"[\"", name, "\"] must be 64 hex digits of a file beside the index");
    out[name] = hex.get<std::string>();
  }
  return out;
}

std::string sha256sums_text(const std::map<std::string, std::string>& digests) {
  std::string out;
  for (const auto& [name, digest] : digests) out += digest + "  " + name + "\n";
  return out;
}

std::map<std::string, std::string> read_sha256sums(const std::string& path) {
  std::map<std::string, std::string> out;
  std::ifstream in(path);
  if (!in) return out;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.empty()) continue;
    // "<64 hex>  <name>", or "<64 hex> *<name>" (binary mode)
    if (line.size() < 67 || line.find_first_not_of("0123456789abcdef") < 64 || line[64] != ' ' ||
        (line[65] != ' ' && line[65] != '*'))
      fail(path, ":", n, ": expected '<sha256>  <file>' as sha256sum writes it");
    out[line.substr(66)] = line.substr(0, 64);
  }
  return out;
}

}  // namespace fsdpc
