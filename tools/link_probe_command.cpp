// fsdpc link-probe: the link probe of runtime/planner/link_probe.h, run
// under mpirun; `advise --hardware local` runs it for its world, and a user
// may run it across real nodes to write the inter_node part of a profile.
#include <memory>

#include "executors/comm/mpi_world.h"
#include "runtime/planner/link_probe.h"
#include "tools/cli_io.h"
#include "tools/commands.h"

namespace fsdpc::cli {

Command add_link_probe_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "link-probe", "Measure the link between this MPI world's ranks through the runtime's collectives (run under "
                    "mpirun -np N): latency, bandwidth and each collective's host time, as one JSON object");
  auto out = std::make_shared<std::string>("-");
  auto bytes = std::make_shared<int64_t>(16 << 20);
  cmd->add_option("--out", *out, "Where rank 0 writes the JSON (default -: standard output)");
  cmd->add_option("--bytes", *bytes, "Bytes of the large collectives' buffers (all_gather's output, the others' input)")
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 32));
  return Command{cmd, [out, bytes] {
                   const std::string json = link_probe(*bytes);
                   if (mpi_world_rank() == 0) write_output(*out, json);
                 }};
}

}  // namespace fsdpc::cli
