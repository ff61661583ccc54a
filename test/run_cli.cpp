#include "test/run_cli.h"

#include <sys/wait.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test/golden.h"
#include "test/scratch.h"

namespace fsdpc::testing {

Run run_shell(const std::string& command, const RunOptions& options) {
  static std::atomic<int> runs{0};
  const std::string n = std::to_string(runs++);
  const std::filesystem::path out = scratch("run" + n + ".out"), err = scratch("run" + n + ".err");
  std::string line = options.env.empty() ? "" : options.env + " ";
  if (options.timeout_s > 0) line += "timeout " + std::to_string(options.timeout_s) + " ";
  line += command + " >'" + out.string() + "' " + (options.merge ? "2>&1" : "2>'" + err.string() + "'") +
          (options.stdin_file.empty() ? " </dev/null" : " <'" + options.stdin_file + "'");
  const int status = std::system(line.c_str());
  Run r;
  if (status != -1) r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(out.string());
  r.err = read_file(err.string());
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

std::string fsdpc_command(const std::string& args) { return std::string("'") + FSDPC_BIN + "' " + args; }

std::string mpirun_command(int np) {
  return std::string(FSDPC_MPIEXEC) + (np > 0 ? " -n " + std::to_string(np) : "") +
         " --oversubscribe --allow-run-as-root";
}

Run run_fsdpc(const std::string& args, const RunOptions& options) { return run_shell(fsdpc_command(args), options); }

Run run_fsdpc_mpi(int np, const std::string& args, const RunOptions& options) {
  return run_shell(mpirun_command(np) + " " + fsdpc_command(args), options);
}

std::vector<double> logged_losses(const std::string& path) {
  std::vector<double> losses;
  std::ifstream log(path);
  for (std::string line; std::getline(log, line);) losses.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  return losses;
}

}  // namespace fsdpc::testing
