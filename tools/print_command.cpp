// fsdpc print: parse a trace (text or JSON), verify it, print it canonically.
#include "passes/render.h"
#include "tools/cli_io.h"
#include "tools/commands.h"

namespace fsdpc::cli {

Command add_print_command(CLI::App& app) {
  struct Args {
    std::string file, format = "text", output;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("print", "Parse a trace (text or JSON), verify it, print it canonically");
  cmd->add_option("file", a->file, "Trace file (text or JSON); - for standard input")->required();
  cmd->add_option("--format", a->format, "Output form")->check(CLI::IsMember(trace_formats()))->capture_default_str();
  cmd->add_option("-o,--output", a->output, "Write to FILE instead of standard output");
  return Command{cmd, [a] { write_output(a->output, render_trace(load_trace(a->file), a->format)); }};
}

}  // namespace fsdpc::cli
