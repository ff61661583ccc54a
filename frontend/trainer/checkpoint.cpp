// A training run's checkpoint files (frontend/trainer/checkpoint.h).
#include "frontend/trainer/checkpoint.h"

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <vector>

#include "executors/comm/mpi_world.h"
#include "frontend/hf_checkpoint.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "runtime/reliability/consistency.h"
#include "runtime/io/files.h"
#include "runtime/io/integrity.h"
#include "runtime/io/sha256.h"

namespace fsdpc {

void save_state(const std::string& path, const std::map<std::string, HostTensor>& state) {
  std::ostringstream js;
  js.precision(9);
  js << "{";
  bool first = true;
  for (const auto& [name, t] : state) {
    js << (first ? "\n" : ",\n") << "  \"" << name << "\": {\"shape\": " << shape_str(t.shape) << ", \"data\": [";
    for (size_t i = 0; i < t.f32.size(); ++i) js << (i ? ", " : "") << t.f32[i];
    js << "]}";
    first = false;
  }
  js << "\n}\n";
  write_file_atomically(path, js.str());
}

void save_checkpoint(Engine& engine, const LanguageModel& model, const std::string& dir, int64_t next_step, bool full,
                     int64_t shard_bytes) {
  namespace fs = std::filesystem;
  // full: also the gathered Hugging Face export (rank 0 holds the whole
  // model for it); sharded: no rank ever holds more than its shards.
  // SHA256SUMS covers the export; it goes first and comes back last, so it
  // never vouches for a file it was not computed from.
  const fs::path sums = fs::path(dir) / "SHA256SUMS";
  if (full && engine.rank() == 0) fs::remove(sums);
  std::vector<std::string> files;
  if (full) files = save_hf_checkpoint(engine, model, dir, shard_bytes);
  else if (engine.rank() == 0) save_hf_config(model, dir);
  if (full && engine.rank() == 0) {
    files.push_back("config.json");
    std::map<std::string, std::string> digests;
    for (const std::string& f : files) digests[f] = sha256_file_hex((fs::path(dir) / f).string());
    write_file_atomically(sums.string(), sha256sums_text(digests));
  }
  const fs::path state = fs::path(dir) / "state", name = "step-" + std::to_string(next_step);
  const fs::path tmp = state / (name.string() + ".tmp"), done = state / name;
  if (engine.rank() == 0) {
    fs::remove_all(tmp);
    fs::create_directories(tmp);
  }
  engine.barrier();
  engine.save_rank_state(tmp.string(), next_step);
  // Each rank hashes its own file, in parallel; the index records them all.
  const std::vector<std::string> digests =
      gather_file_digests((tmp / ("rank-" + std::to_string(engine.rank()) + ".safetensors")).string());
  // Fault injection for the kill-during-save test: die with every rank's
  // file written but the checkpoint not yet renamed into place.
  if (const char* kill = std::getenv("FSDPC_TEST_KILL_DURING_SAVE"); kill && std::to_string(next_step) == kill)
    mpi_abort(3);
  if (engine.rank() == 0) {
    fs::remove_all(done);
    fs::rename(tmp, done);
    // The index: which files hold the state, for tools and for resuming.
    std::string index = "{\"world\": " + std::to_string(engine.world()) + ", \"step\": " +
                        std::to_string(next_step) + ", \"files\": [";
    for (int r = 0; r < engine.world(); ++r)
      index += (r ? ", " : "") + std::string("\"rank-") + std::to_string(r) + ".safetensors\"";
    index += "], \"sha256\": {";
    for (int r = 0; r < engine.world(); ++r)
      index += (r ? ", " : "") + std::string("\"rank-") + std::to_string(r) + ".safetensors\": \"" +
               digests[static_cast<size_t>(r)] + "\"";
    write_file_atomically((done / "index.json").string(), index + "}}\n");
    write_file_atomically((state / "latest").string(), name.string() + "\n");
  }
  engine.barrier();
}

int64_t resume_checkpoint(Engine& engine, const std::string& dir) {
  namespace fs = std::filesystem;
  std::string latest = read_file((fs::path(dir) / "state" / "latest").string());
  while (!latest.empty() && (latest.back() == '\n' || latest.back() == ' ')) latest.pop_back();
  if (latest.rfind("step-", 0) != 0) fail(dir, "/state/latest: expected 'step-N', got '", latest, "'");
  const fs::path state = fs::path(dir) / "state" / latest;
  // Every rank agrees on the files before any rank reads them.
  if (fs::exists(state / "index.json")) {
    const std::string bad = verify_file_digests(state.string(), read_index_digests((state / "index.json").string()),
                                                (state / "index.json").string());
    if (!bad.empty()) exit_all_ranks(2, bad);
  }
  return engine.load_rank_state(state.string());
}

void verify_init(const std::string& path) {
  namespace fs = std::filesystem;
  const bool folder = fs::is_directory(path);
  const fs::path dir = folder ? fs::path(path) : fs::path(path).parent_path();
  std::map<std::string, std::string> digests = read_sha256sums((dir / "SHA256SUMS").string());
  if (!folder) {  // only the file asked for
    const std::string name = fs::path(path).filename().string();
    digests = digests.count(name) ? std::map<std::string, std::string>{{name, digests[name]}}
                                  : std::map<std::string, std::string>{};
  }
  const std::string bad = verify_file_digests(dir.string(), digests, (dir / "SHA256SUMS").string());
  if (!bad.empty()) exit_all_ranks(2, bad);
}

}  // namespace fsdpc
