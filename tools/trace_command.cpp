// fsdpc trace: capture a model and print its trace.
#include "passes/render.h"
#include "tools/cli_io.h"
#include "tools/commands.h"

namespace fsdpc::cli {

Command add_trace_command(CLI::App& app) {
  struct Args {
    ModelSource src;
    std::string format = "text", output;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("trace", "Capture a model and print its trace");
  add_model_options(cmd, a->src, /*allow_trace_file=*/false);
  cmd->add_option("--format", a->format, "Output form")->check(CLI::IsMember(trace_formats()))->capture_default_str();
  cmd->add_option("-o,--output", a->output, "Write to FILE instead of standard output");
  return Command{cmd, [a] { write_output(a->output, render_trace(load_source_trace(a->src), a->format)); },
                 [a] { check_model_source(a->src, false); }};
}

}  // namespace fsdpc::cli
