// The launch fingerprint of `fsdpc train` (see tools/train_fingerprint.h).
#include "tools/train_fingerprint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "executors/claim.h"
#include "frontend/language_model.h"
#include "ir/printer.h"
#include "tools/cli_io.h"

namespace fsdpc::cli {

namespace {

std::string exact(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// A checkpoint folder as a rank sees it: its files, each by size and the
// digest of its ends (--resume: the state `latest` names).
std::string folder_fingerprint(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::string out;
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) out += f.filename().string() + ": " + file_fingerprint(f.string()) + "; ";
  return out;
}

}  // namespace

LaunchFingerprint launch_fingerprint(const TrainArgs& a, const JitOptions& o, const Model& model, int world) {
  namespace fs = std::filesystem;
  LaunchFingerprint f;
  const PipelineOptions& p = o.pipeline;
  const EngineOptions& e = o.engine;
  const std::vector<ModelInput> inputs = model.inputs(o.capture);
  f.add("--model", model.name());
  if (const auto* lm = dynamic_cast<const LanguageModel*>(&model)) {
    f.add("the model config", lm->config_summary());
    f.add("--seq", std::to_string(inputs.at(0).shape.at(1)));
  }
  f.add("--batch", std::to_string(*o.capture.batch * world));
  std::string shapes;
  for (const ModelInput& in : inputs) shapes += in.name + " " + shape_str(in.shape) + "; ";
  f.add("the input shapes", shapes);
  f.add("--strategy", a.sharding.strategy);
  f.add("--mesh", std::to_string(p.mesh.replicas) + "," + std::to_string(p.mesh.shards));
  f.add("--wrap", a.sharding.wrap);
  f.add("--bucketing", a.sharding.bucketing);
  f.add("--bucket-mb", exact(a.sharding.bucket_mb));
  f.add("--prefetch", std::to_string(a.sharding.prefetch));
  f.add("--max-inflight", std::to_string(a.sharding.max_inflight));
  f.add("--precision", a.sharding.precision);
  f.add("--executor", resolve_executor(a.executor));
  // Fused kernels may round differently as regions grow (reductions), so the
  // ranks of one job fuse alike even though the collectives do not change.
  f.add("--fusion", a.fusion);
  f.add("--grad-accum", std::to_string(a.grad_accum));
  f.add("--pp-schedule", a.sharding.pp_schedule);
  f.add("--no-sync", a.no_sync ? "on" : "off");
  f.add("--keep-gathered", a.keep_gathered ? "on" : "off");
  f.add("--optimizer", a.optimizer);
  f.add("--lr", exact(a.lr));
  f.add("--beta1", exact(a.beta1));
  f.add("--beta2", exact(a.beta2));
  f.add("--eps", exact(a.eps));
  f.add("--weight-decay", exact(a.weight_decay));
  f.add("--momentum", exact(a.momentum));
  f.add("--lr-schedule", a.lr_schedule);
  f.add("--warmup-steps", std::to_string(e.lr_schedule.warmup_steps));
  f.add("--decay-steps", std::to_string(e.lr_schedule.decay_steps));
  f.add("--min-lr", exact(a.min_lr));
  f.add("--clip", exact(a.clip));
  f.add("--seed", std::to_string(a.seed));
  f.add("--steps", std::to_string(a.steps));
  f.add("--sampling", a.sampling);
  f.add("--data", a.data.empty() ? "" : file_fingerprint(a.data));
  f.add("--val-data", a.val_data.empty() ? "" : file_fingerprint(a.val_data));
  f.add("--data-dtype", a.data_dtype);
  f.add("--eval-every", std::to_string(a.eval_every));
  f.add("--eval-batches", std::to_string(a.eval_batches));
  f.add("--init", a.init.empty() ? "" : fs::is_directory(a.init) ? folder_fingerprint(a.init) : file_fingerprint(a.init));
  std::string resume;
  if (!a.resume.empty()) {
    const fs::path latest = fs::path(a.resume) / "state" / "latest";
    std::string name = fs::exists(latest) ? read_input(latest.string()) : "(no state/latest)";
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    resume = name + ": ";
    if (fs::is_directory(fs::path(a.resume) / "state" / name)) resume += folder_fingerprint(fs::path(a.resume) / "state" / name);
  }
  f.add("--resume", resume);
  f.add("--save", a.save);
  f.add("--save-every", std::to_string(a.save_every));
  f.add("--checkpoint", a.checkpoint);
  // Profiling adds collectives (the clock barrier, the gather): all ranks or none.
  f.add("--profile", a.profile.empty() ? "off" : "on, steps " + (a.profile_steps.empty() ? "default" : a.profile_steps));
  return f;
}

void add_traces(LaunchFingerprint& f, const EngineTraces& t) {
  // Pipeline stages run different traces: every rank compiled all of them.
  for (size_t s = 0; s < t.pipeline.size(); ++s) {
    f.add_text("stage " + std::to_string(s) + "'s forward trace", print_trace(t.pipeline[s].forward));
    f.add_text("stage " + std::to_string(s) + "'s backward trace", print_trace(t.pipeline[s].backward));
  }
  if (t.pipeline.empty()) {
    f.add_text("the forward trace", print_trace(t.sync.forward));
    f.add_text("the backward trace", print_trace(t.sync.backward));
  }
  // A pipeline stage's no_sync and accumulate traces are its own: they
  // follow from the options and the stages compared above.
  if (t.no_sync && t.pipeline.empty()) {
    f.add_text("the no_sync forward trace", print_trace(t.no_sync->forward));
    f.add_text("the no_sync backward trace", print_trace(t.no_sync->backward));
  }
  if (t.accumulate && t.pipeline.empty()) {
    f.add_text("the accumulating forward trace", print_trace(t.accumulate->forward));
    f.add_text("the accumulating backward trace", print_trace(t.accumulate->backward));
  }
  if (t.gathered && t.pipeline.empty()) {
    f.add_text("the gather trace", print_trace(t.gathered->gather));
    f.add_text("the reduce trace", print_trace(t.gathered->reduce));
    f.add_text("the gathered forward trace", print_trace(t.gathered->micro.forward));
    f.add_text("the gathered backward trace", print_trace(t.gathered->micro.backward));
  }
}

}  // namespace fsdpc::cli
