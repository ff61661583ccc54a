// The fsdpc command line. A user's mistake prints one line to stderr and
// exits with code 2; --help and each sub-command's help exit 0.
#include <mpi.h>

#include <cstdio>

#include "executors/comm/mpi_check.h"
#include "executors/comm/mpi_world.h"
#include "ir/error.h"
#include "tools/commands.h"

namespace fsdpc::cli {
namespace {

constexpr int kUserError = 2;
constexpr int kFailure = 1;

// Under mpirun another rank may be waiting in a collective for this one; a
// plain exit would leave it (and MPI_Finalize) hanging.
int stop_all_ranks(int code) {
  int mpi_started = 0, mpi_finished = 0;
  FSDPC_MPI_CHECK(MPI_Initialized(&mpi_started));
  FSDPC_MPI_CHECK(MPI_Finalized(&mpi_finished));
  if (mpi_started && !mpi_finished && mpi_world_size() > 1) mpi_abort(code);
  return code;
}

int run(int argc, char** argv) {
  CLI::App app{"fsdpc: a trace compiler for sharded data-parallel training", "fsdpc"};
  app.require_subcommand(1);
  std::vector<Command> commands = {add_trace_command(app), add_print_command(app), add_dump_command(app), add_train_command(app),
                                   add_generate_command(app), add_flight_command(app), add_passes_command(app),
                                   add_models_command(app), add_advise_command(app), add_link_probe_command(app),
                                   add_matmul_probe_command(app), add_tokenize_command(app)};
  try {
    // CLI11 reports an unknown first word as a missing subcommand; name it.
    const std::string first = argc > 1 ? argv[1] : "";
    bool known = first.empty() || first[0] == '-';
    for (const Command& c : commands) known = known || c.app->get_name() == first;
    if (!known)
      throw CLI::ExtrasError("unknown command '" + first + "' (expected trace, print, dump, train, generate, tokenize, flight, passes, models, advise or link-probe)",
                             CLI::ExitCodes::ExtrasError);
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "fsdpc: error: %s (see fsdpc --help)\n", e.what());
    return kUserError;
  }
  try {
    for (const Command& c : commands) {
      if (!c.app->parsed()) continue;
      c.validate();
      c.run();
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "fsdpc: error: %s\n", e.what());
    return stop_all_ranks(kUserError);
  } catch (const std::exception& e) {
    // Not a user's mistake the checks name (a full disk, a bug): still one
    // line and an exit code, never an uncaught exception's abort.
    std::fprintf(stderr, "fsdpc: error: %s\n", e.what());
    return stop_all_ranks(kFailure);
  }
  return 0;
}

}  // namespace
}  // namespace fsdpc::cli

int main(int argc, char** argv) { return fsdpc::cli::run(argc, argv); }
