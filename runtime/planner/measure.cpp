// fsdpc advise --measure: each candidate run here as a user would run it,
// `mpirun -np N fsdpc train ...` for some steps with --log-json, so the
// predicted step time and peak stand beside measured ones. Runs are
// sequential: concurrent ones would share the cores and time each other.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "executors/comm/mpi_check.h"
#include "ir/error.h"
#include "runtime/io/files.h"
#include "runtime/planner/planner.h"

namespace fsdpc {

namespace fs = std::filesystem;

namespace {

// One candidate's run of `steps` steps; its files go in `dir`. Appends the
// times of its steady steps to `times` and records the peak and step count
// in `m`. Left out: the first step, which compiles, JIT-builds kernels and
// allocates, and from a run of four or more also the second, which first
// touches the optimizer's state (AdamW's moments; a 4x512 GPT-2's second
// step on 2 ranks took 814 ms where the later ones took 616). A run of one
// step keeps it.
void run_one(const AdviseSetup& s, const std::string& mpirun, const std::string& model_flags, int steps,
             const Candidate& c, const fs::path& dir, Measurement& m, std::vector<double>& times) {
  m.ran = true;
  const fs::path log = dir / "log.jsonl", err = dir / "stderr.txt";
  fs::remove(log);
  const int code = run_under_mpirun(mpirun, s.world,
                                    "train " + model_flags + " " + c.flags() + " --precision " + std::string(dtype_name(s.precision)) +
                                        " --steps " + std::to_string(steps) + " --log-json " + shell_quote(log.string()),
                                    err.string());
  if (code != 0) {
    m.error = "exit " + std::to_string(code) + ": " + last_line(err.string());
    return;
  }
  std::vector<double> ms;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    try {
      const nlohmann::json rec = nlohmann::json::parse(line);
      ms.push_back(rec.at("step_ms").get<double>());
      m.peak_bytes = std::max(m.peak_bytes, rec.at("peak_bytes").at("total").get<int64_t>());
    } catch (const std::exception& e) {
      m.error = "unreadable --log-json line: " + std::string(e.what());
      return;
    }
  }
  m.steps += static_cast<int>(ms.size());
  if (ms.empty()) {
    m.error = "exit 0 but no step was logged";
    return;
  }
  const size_t warm = ms.size() >= 4 ? 2 : ms.size() > 1 ? 1 : 0;
  times.insert(times.end(), ms.begin() + static_cast<std::ptrdiff_t>(warm), ms.end());
}

double median_seconds(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  return (n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2) / 1e3;
}

}  // namespace

int auto_measure_steps(double predicted_seconds) {
  // About a second of steps after the first: a step of a few milliseconds
  // varies by tens of percent from step to step on a shared host (the
  // scheduler, page faults, MPI's progress), and a median over four such
  // steps is as noisy; a second of them is not. Large steps keep the floor.
  constexpr double kMeasureSeconds = 1.0;
  constexpr int kFloor = 5, kCeiling = 1000;
  if (!(predicted_seconds > 0)) return kFloor;
  const double k = 1.0 + std::ceil(kMeasureSeconds / predicted_seconds);
  return static_cast<int>(std::clamp(k, static_cast<double>(kFloor), static_cast<double>(kCeiling)));
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

int run_under_mpirun(const std::string& mpirun, int world, const std::string& args, const std::string& stderr_file) {
  // Every rank lives on this host, so Open MPI needs --oversubscribe when N
  // exceeds the cores; --allow-run-as-root lets it start in containers.
  // --bind-to none: for up to 2 ranks Open MPI binds each to one core, and a
  // rank's kernels then get one thread (cpu_threads() follows the affinity
  // mask), while the local profile prices every rank with the host's cores
  // divided among the ranks; unbound, each rank gets that share.
  const std::string cmd = shell_quote(mpirun) + " -np " + std::to_string(world) +
                          " --oversubscribe --bind-to none --allow-run-as-root " +
                          shell_quote(fsdpc_executable()) + " " + args +
                          " </dev/null >/dev/null 2>" + shell_quote(stderr_file);
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string last_line(const std::string& file) {
  std::ifstream in(file);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return last.empty() ? "(no output)" : last;
}

double median(std::vector<double> v) {
  FSDPC_CHECK(!v.empty()) << "median of nothing";
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

double slowest_rank(double mine) {
  double most = 0;
  FSDPC_MPI_CHECK(MPI_Allreduce(&mine, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return most;
}

std::string run_probe(int world, const std::string& input, const std::function<std::string(const std::string&)>& args) {
  const std::string mpirun = find_mpirun();
  if (mpirun.empty()) fail("no mpirun on PATH (or FSDPC_MPIRUN)");
  std::string dir = (fs::temp_directory_path() / "fsdpc-probe-XXXXXX").string();
  if (!mkdtemp(dir.data())) fail("cannot create a folder under ", fs::temp_directory_path().string());
  std::string out;
  try {
    if (!input.empty()) write_file_atomically(dir + "/input", input);
    const int code = run_under_mpirun(mpirun, world, args(dir), dir + "/stderr.txt");
    if (code != 0) fail("exit ", code, ": ", last_line(dir + "/stderr.txt"));
    out = read_file(dir + "/out.json");
  } catch (const Error&) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    throw;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return out;
}

namespace {

// `name` in a folder of $PATH, or "".
std::string on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string d; std::getline(dirs, d, ':');) {
    const fs::path p = fs::path(d.empty() ? "." : d) / name;
    if (access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

}  // namespace

std::string find_mpirun() {
  if (const char* env = std::getenv("FSDPC_MPIRUN"); env && *env) return access(env, X_OK) == 0 ? env : "";
  return on_path("mpirun");
}

std::string fsdpc_executable() {
  if (const char* env = std::getenv("FSDPC_EXECUTABLE"); env && *env) {
    if (access(env, X_OK) != 0) fail("FSDPC_EXECUTABLE=", env, ": not an executable file");
    return env;
  }
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && self.filename() == "fsdpc") return self.string();
  if (std::string found = on_path("fsdpc"); !found.empty()) return found;
  fail("the planner runs the fsdpc CLI under mpirun, and found none: this program is not fsdpc, none is on PATH, "
       "and FSDPC_EXECUTABLE names none");
}

void measure_candidates(const AdviseSetup& s, const std::string& mpirun, const std::string& model_flags, int steps,
                        std::vector<Candidate>& cs) {
  std::string tmpl = (fs::temp_directory_path() / "fsdpc-advise-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) fail("--measure: cannot create a folder under ", fs::temp_directory_path().string());
  const fs::path dir = tmpl;
  // Without --measure-steps, the candidates run in kRounds interleaved
  // rounds (1, 2, ..., n, then 1, 2, ... again), each round a third of the
  // steps (at least two) after its own two warm-up steps. A shared host's
  // load drifts over seconds, and candidates measured one after another
  // would carry that drift into their order (identical traces measured 1.29
  // and 0.96 ms a step a minute apart); interleaved, each candidate's median
  // spans the whole run.
  constexpr int kRounds = 3;
  const int rounds = steps > 0 ? 1 : kRounds;
  std::vector<std::vector<double>> times(cs.size());
  for (Candidate& c : cs) {
    if (s.target != Target::cpu)
      c.measured.error = "not run: measuring runs the cpu executor only";
    else if (!c.fits)
      c.measured.error = "not run: over the memory cap";
  }
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < cs.size(); ++i) {
      Candidate& c = cs[i];
      if (!c.measured.error.empty()) continue;
      const int k = steps > 0 ? steps : 2 + std::max(2, (auto_measure_steps(c.sim.seconds) + rounds - 1) / rounds);
      const std::string round =
          rounds > 1 ? " (round " + std::to_string(r + 1) + "/" + std::to_string(rounds) + ")" : std::string();
      std::fprintf(stderr, "measuring %zu/%zu%s: %s, %d steps ...\n", i + 1, cs.size(), round.c_str(),
                   c.name().c_str(), k);
      run_one(s, mpirun, model_flags, k, c, dir, c.measured, times[i]);
    }
  for (size_t i = 0; i < cs.size(); ++i)
    if (cs[i].measured.ok() && !times[i].empty()) cs[i].measured.step_seconds = median_seconds(times[i]);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace fsdpc
