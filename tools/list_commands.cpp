// fsdpc models and fsdpc passes: what is built in.
#include <cstdio>

#include "frontend/models.h"
#include "passes/registry.h"
#include "tools/commands.h"

namespace fsdpc::cli {

Command add_models_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("models", "List the built-in models");
  return Command{cmd, [] {
                   for (const ModelEntry& e : model_catalog())
                     std::printf("%-12s %s\n", e.name.c_str(), e.description.c_str());
                 }};
}

Command add_passes_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("passes", "List every pass, in pipeline order");
  return Command{cmd, [] {
                   for (const PassInfo& p : pass_registry())
                     std::printf("%-10s %s\n", p.name.c_str(), p.description.c_str());
                 }};
}

}  // namespace fsdpc::cli
