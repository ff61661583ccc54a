// fsdpc matmul-probe (hidden; advise --hardware local runs it): the matmul
// probe of runtime/planner/matmul_probe.h, run under mpirun.
#include <memory>

#include "executors/comm/mpi_world.h"
#include "runtime/planner/matmul_probe.h"
#include "tools/cli_io.h"
#include "tools/commands.h"

namespace fsdpc::cli {

Command add_matmul_probe_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("matmul-probe", "Time matmul statements on every rank at once (advise runs it)");
  cmd->group("");  // plumbing of advise --hardware local, not a user's command
  auto traces = std::make_shared<std::string>(), out = std::make_shared<std::string>("-");
  cmd->add_option("--traces", *traces, "JSON lines: one trace per statement to time")->required();
  cmd->add_option("--out", *out, "Where rank 0 writes the JSON (default -: standard output)");
  return Command{cmd, [traces, out] {
                   const std::string json = matmul_probe(*traces);
                   if (mpi_world_rank() == 0) write_output(*out, json);
                 }};
}

}  // namespace fsdpc::cli
