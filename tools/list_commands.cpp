// fsdpc models and fsdpc passes: what is built in.
#include <algorithm>
#include <cstdio>

#include "frontend/models/registry.h"
#include "passes/registry.h"
#include "tools/commands.h"

namespace fsdpc::cli {

Command add_models_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("models", "List the built-in models");
  return Command{cmd, [] {
                   int width = 0;  // the longest name (tinyllama-1.1b) sets the column
                   for (const ModelEntry& e : model_catalog()) width = std::max(width, static_cast<int>(e.name.size()));
                   for (const ModelEntry& e : model_catalog())
                     std::printf("%-*s %s\n", width, e.name.c_str(), e.description.c_str());
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
