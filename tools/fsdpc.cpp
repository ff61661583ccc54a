// The fsdpc command line: capture models as traces, read and print traces.
// A user's mistake prints one line to stderr and exits with code 2.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "frontend/models.h"
#include "ir/dot.h"
#include "ir/error.h"
#include "ir/json.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace fsdpc {
namespace {

constexpr int kUserError = 2;

std::string read_input(const std::string& path) {
  std::ostringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(path, ": is a directory, expected a trace file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open (", std::strerror(errno), ")");
  ss << in.rdbuf();
  return ss.str();
}

// Writes to a sibling temporary file and renames it over `path`, so a
// failure never leaves a partial file behind.
void write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text << std::flush;
    if (!std::cout) fail("cannot write to standard output");
    return;
  }
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(path, ": cannot open for writing (", std::strerror(errno), ")");
    out << text;
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      fail(path, ": write failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    fail(path, ": cannot replace (", ec.message(), ")");
  }
}

std::string render(const Trace& trace, const std::string& format) {
  if (format == "json") return trace_to_json(trace) + "\n";
  if (format == "dot") return trace_to_dot(trace);
  return print_trace(trace);
}

bool looks_like_json(const std::string& text) {
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') continue;
    return c == '{';
  }
  return false;
}

struct TraceArgs {
  std::string model, config, format = "text", output;
  int64_t batch = 0, seq = 0;
};

void run_trace(const TraceArgs& a) {
  std::unique_ptr<Model> model = a.config.empty() ? make_model(a.model) : make_model_from_config(a.config);
  CaptureOptions options;
  if (a.batch) options.batch = a.batch;
  if (a.seq) options.seq = a.seq;
  write_output(a.output, render(capture(*model, options), a.format));
}

struct PrintArgs {
  std::string file, format = "text", output;
};

void run_print(const PrintArgs& a) {
  std::string text = read_input(a.file);
  std::string name = a.file == "-" ? "<stdin>" : a.file;
  Trace trace = looks_like_json(text) ? trace_from_json(text, name) : parse_trace(text, name);
  try {
    verify(trace);
  } catch (const Error& e) {
    fail(name, ": invalid trace: ", e.what());
  }
  write_output(a.output, render(trace, a.format));
}

void run_models() {
  for (const ModelEntry& e : model_catalog()) std::printf("%-12s %s\n", e.name.c_str(), e.description.c_str());
}

int run(int argc, char** argv) {
  CLI::App app{"fsdpc: a trace compiler for sharded data-parallel training", "fsdpc"};
  app.require_subcommand(1);
  const std::vector<std::string> formats = {"text", "json", "dot"};

  TraceArgs ta;
  CLI::App* trace = app.add_subcommand("trace", "Capture a model and print its trace");
  auto* model_opt = trace->add_option("--model", ta.model, "Built-in model (see `fsdpc models`)");
  auto* config_opt = trace->add_option("--config", ta.config, "Hugging Face GPT-2 config.json")
                         ->check(CLI::ExistingFile);
  model_opt->excludes(config_opt);
  trace->add_option("--batch", ta.batch, "Batch size (default: the model's)")->check(CLI::PositiveNumber);
  trace->add_option("--seq", ta.seq, "Sequence length (default: the model's context)")
      ->check(CLI::PositiveNumber);
  trace->add_option("--format", ta.format, "Output form")->check(CLI::IsMember(formats))
      ->capture_default_str();
  trace->add_option("-o,--output", ta.output, "Write to FILE instead of standard output");

  PrintArgs pa;
  CLI::App* print = app.add_subcommand("print", "Parse a trace (text or JSON), verify it, print it canonically");
  print->add_option("file", pa.file, "Trace file (text or JSON); - for standard input")->required();
  print->add_option("--format", pa.format, "Output form")->check(CLI::IsMember(formats))
      ->capture_default_str();
  print->add_option("-o,--output", pa.output, "Write to FILE instead of standard output");

  CLI::App* models = app.add_subcommand("models", "List the built-in models");

  try {
    // CLI11 reports an unknown first word as a missing subcommand; name it.
    const std::string first = argc > 1 ? argv[1] : "";
    if (!first.empty() && first[0] != '-' && first != "trace" && first != "print" && first != "models")
      throw CLI::ExtrasError("unknown command '" + first + "' (expected trace, print or models)",
                             CLI::ExitCodes::ExtrasError);
    app.parse(argc, argv);
    if (trace->parsed() && ta.model.empty() && ta.config.empty())
      throw CLI::RequiredError("trace: one of --model or --config");
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "fsdpc: error: %s (see fsdpc --help)\n", e.what());
    return kUserError;
  }

  try {
    if (trace->parsed()) run_trace(ta);
    if (print->parsed()) run_print(pa);
    if (models->parsed()) run_models();
  } catch (const Error& e) {
    std::fprintf(stderr, "fsdpc: error: %s\n", e.what());
    return kUserError;
  }
  return 0;
}

}  // namespace
}  // namespace fsdpc

int main(int argc, char** argv) { return fsdpc::run(argc, argv); }
