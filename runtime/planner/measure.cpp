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
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "executors/comm/mpi_check.h"
#include "ir/error.h"
#include "runtime/io/files.h"
#include "runtime/planner/planner.h"

namespace fsdpc {

namespace fs = std::filesystem;

namespace {

// One candidate's run of `steps` steps as `flags`; its files go in `dir`.
// Returns every logged step (a failure sets m.error) and records the peak
// and the step count in `m`.
std::vector<LoggedStep> run_one(const AdviseSetup& s, const std::string& mpirun, const std::string& model_flags,
                                int steps, const std::string& flags, const fs::path& dir, Measurement& m) {
  m.ran = true;
  const fs::path log = dir / "log.jsonl", err = dir / "stderr.txt";
  fs::remove(log);
  const int code = run_under_mpirun(mpirun, s.world,
                                    "train " + model_flags + " " + flags + " --precision " + std::string(dtype_name(s.precision)) +
                                        " --steps " + std::to_string(steps) + " --log-json " + shell_quote(log.string()),
                                    err.string());
  if (code != 0) {
    m.error = "exit " + std::to_string(code) + ": " + last_line(err.string());
    return {};
  }
  std::vector<LoggedStep> run;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    try {
      const nlohmann::json rec = nlohmann::json::parse(line);
      // The log counts steps from 0; the optimizer's count after step s, s + 1,
      // is what DiLoCo's rounds are laid out by.
      run.push_back({rec.at("step").get<int64_t>() + 1, rec.at("step_ms").get<double>(), rec.value("outer_step", false)});
      m.peak_bytes = std::max(m.peak_bytes, rec.at("peak_bytes").at("total").get<int64_t>());
    } catch (const std::exception& e) {
      m.error = "unreadable --log-json line: " + std::string(e.what());
      return {};
    }
  }
  m.steps += static_cast<int>(run.size());
  if (run.empty()) m.error = "exit 0 but no step was logged";
  return run;
}

// The steps a run leaves out as warm-up: the first, which compiles,
// JIT-builds kernels and allocates, and from a run of four or more also the
// second, which first touches the optimizer's state (AdamW's moments; a
// 4x512 GPT-2's second step on 2 ranks took 814 ms where the later ones took
// 616). A run of one step keeps it.
size_t warm_up_steps(size_t logged) { return logged >= 4 ? 2 : logged > 1 ? 1 : 0; }

double median_ms(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  return n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
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

int measure_round_steps(const DilocoOptions& d) {
  if (!d.enabled()) return 0;
  // Each fragment's slot holds its issuing step, TAU steps in flight and as
  // many with nothing in flight, so that most steps without an exchange
  // (the median) are plain inner steps: 2F(TAU + 1), at least 4, at most H.
  const int slots = d.outer_fragments * 2 * (d.outer_delay + 1);
  return std::min(d.outer_steps, std::max(4, slots));
}

void summarise_runs(const std::vector<std::vector<LoggedStep>>& runs, const DilocoOptions& d, Measurement& m) {
  std::vector<double> inner, all;
  for (const std::vector<LoggedStep>& run : runs)
    for (size_t i = warm_up_steps(run.size()); i < run.size(); ++i) {
      all.push_back(run[i].ms);
      if (!run[i].outer) inner.push_back(run[i].ms);
    }
  if (all.empty()) return;
  const int h = measure_round_steps(d);
  if (h == 0) {
    m.step_seconds = median_ms(all) / 1e3;
    return;
  }
  // DiLoCo: the median step without an exchange, plus what whole rounds took
  // beyond that many such steps, spread over the candidate's H. A round is
  // steps qh + 1 .. (q + 1)h for q >= 1: fragment 0 first meets after step
  // h, and with a delay lands in the round after, so the first round lacks
  // a landing (and holds the warm-up). An exchange in flight at the run's
  // end lands at teardown, in no logged step.
  const double plain = median_ms(inner.empty() ? all : inner);
  double round_ms = 0;
  int whole = 0;
  for (const std::vector<LoggedStep>& run : runs) {
    std::map<int64_t, double> by_step;
    for (const LoggedStep& r : run) by_step[r.step] = r.ms;
    for (int64_t q = 1;; ++q) {
      double sum = 0;
      int64_t k = q * h + 1;
      for (; k <= (q + 1) * h; ++k) {
        const auto it = by_step.find(k);
        if (it == by_step.end()) break;
        sum += it->second;
      }
      if (k <= (q + 1) * h) break;  // the run ended inside it
      round_ms += sum;
      ++whole;
    }
  }
  m.round_steps = h;
  if (whole == 0) {  // too short for a round (--measure-steps): the inner step alone, said in the report
    m.step_seconds = plain / 1e3;
    return;
  }
  // A round's extra time is at least nothing: below it is the noise of the
  // plain steps (an outer step cheaper than their spread).
  m.outer_seconds = std::max(0.0, round_ms / whole - h * plain) / 1e3;
  m.rounds = whole;
  m.step_seconds = plain / 1e3 + m.outer_seconds / d.outer_steps;
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
  std::vector<std::vector<std::vector<LoggedStep>>> runs(cs.size());
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
      int k = steps > 0 ? steps : 2 + std::max(2, (auto_measure_steps(c.sim.seconds) + rounds - 1) / rounds);
      // DiLoCo runs as the user would but meets every h steps (its round's
      // work does not depend on H, only how often it comes): an H of 500
      // would take minutes a candidate before its first outer step.
      Candidate as_run = c;
      if (const int h = measure_round_steps(c.diloco); h > 0) {
        as_run.diloco.outer_steps = h;
        if (steps == 0) k = std::max(k, 2 * h);  // the first round is not counted (summarise_runs)
      }
      const std::string round =
          rounds > 1 ? " (round " + std::to_string(r + 1) + "/" + std::to_string(rounds) + ")" : std::string();
      const std::string meets =
          as_run.diloco.enabled() ? ", meeting every " + std::to_string(as_run.diloco.outer_steps) : std::string();
      std::fprintf(stderr, "measuring %zu/%zu%s: %s, %d steps%s ...\n", i + 1, cs.size(), round.c_str(),
                   c.name().c_str(), k, meets.c_str());
      runs[i].push_back(run_one(s, mpirun, model_flags, k, as_run.flags(), dir, c.measured));
    }
  for (size_t i = 0; i < cs.size(); ++i)
    if (cs[i].measured.ok()) summarise_runs(runs[i], cs[i].diloco, cs[i].measured);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace fsdpc
