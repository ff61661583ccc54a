// fsdpc flight DIR: the flight report of runtime/reliability/flight_report.h.
// Exit 0 with the diagnosis (or "all agree"), 2 when a file cannot be read or
// is not a flight recorder dump.
#include <cstdio>
#include <memory>

#include "runtime/reliability/flight_report.h"
#include "tools/commands.h"

namespace fsdpc::cli {

Command add_flight_command(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "flight", "Read every rank's flight recorder (flight-rank{R}.json) and name the first collective they part ways on");
  cmd->add_option("DIR", *dir, "The --flight-dir of a run")->required();
  return Command{cmd, [dir] { std::fputs(flight_report(*dir).c_str(), stdout); }};
}

}  // namespace fsdpc::cli
