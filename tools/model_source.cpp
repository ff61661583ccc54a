// --model / --config / --trace: the trace a command starts from.
#include "frontend/models/registry.h"
#include "ir/error.h"
#include "tools/cli_io.h"
#include "tools/commands.h"

namespace fsdpc::cli {

void add_model_options(CLI::App* cmd, ModelSource& src, bool allow_trace_file) {
  auto* model = cmd->add_option("--model", src.model, "Built-in model (see `fsdpc models`)");
  auto* config = cmd->add_option("--config", src.config, "Hugging Face config.json (model_type " + supported_model_types_text() + ")")->check(CLI::ExistingFile);
  model->excludes(config);
  if (allow_trace_file) {
    auto* trace = cmd->add_option("--trace", src.trace_file, "A captured trace file (text or JSON)");
    trace->excludes(model);
    trace->excludes(config);
  }
  cmd->add_option("--batch", src.batch, "Batch size (default: the model's)")->check(whole_number(1));
  cmd->add_option("--seq", src.seq, "Sequence length (default: the model's context)")->check(whole_number(1));
}

void check_model_source(const ModelSource& src, bool allow_trace_file) {
  if (src.model.empty() && src.config.empty() && src.trace_file.empty())
    fail(allow_trace_file ? "one of --model, --config or --trace is required"
                          : "one of --model or --config is required");
  if (!src.trace_file.empty() && (src.batch || src.seq))
    fail("--batch and --seq apply to models; a --trace file has its shapes");
}

Trace load_source_trace(const ModelSource& src) {
  if (!src.trace_file.empty()) return load_trace(src.trace_file);
  std::unique_ptr<Model> model = src.config.empty() ? make_model(src.model) : make_model_from_config(src.config);
  CaptureOptions options;
  if (src.batch) options.batch = src.batch;
  if (src.seq) options.seq = src.seq;
  return capture(*model, options);
}

TensorParallelPlan source_tensor_parallel_plan(const ModelSource& src) {
  // A trace file names no family: every family's rules, whose parameter
  // names are each family's own.
  if (!src.trace_file.empty()) return registered_tensor_parallel_plan();
  return (src.config.empty() ? make_model(src.model) : make_model_from_config(src.config))->tensor_parallel_plan();
}

}  // namespace fsdpc::cli
