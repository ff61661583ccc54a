// The launch fingerprint of a training run (frontend/trainer/launch_fingerprint.h).
#include "frontend/trainer/launch_fingerprint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "executors/claim.h"
#include "frontend/models/language_model.h"
#include "ir/printer.h"
#include "passes/strategy.h"
#include "runtime/io/files.h"
#include "runtime/lr_schedule.h"
#include "runtime/pipeline_schedule.h"

namespace fsdpc {

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

LaunchFingerprint launch_fingerprint(const TrainOptions& t, const JitOptions& o, const Model& model, int world) {
  namespace fs = std::filesystem;
  LaunchFingerprint f;
  const PipelineOptions& p = o.pipeline;
  const EngineOptions& e = o.engine;
  const OptimizerOptions& opt = e.optimizer;
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
  f.add("--strategy", std::string(strategy_name(p.strategy)));
  f.add("--mesh", std::to_string(p.mesh.replicas) + "," + std::to_string(p.mesh.shards));
  f.add("--wrap", p.wrap);
  f.add("--bucketing", p.bucketing ? "unit" : "none");
  f.add("--bucket-mb", exact(p.bucket_mb));
  f.add("--prefetch", std::to_string(p.prefetch));
  f.add("--max-inflight", std::to_string(p.max_inflight));
  f.add("--precision", std::string(dtype_name(p.precision)));
  f.add("--reduce-dtype", std::string(dtype_name(p.reduce_dtype)));
  // A fused head sums its loss in chunks: the ranks of one job fuse alike.
  f.add("--loss-chunk", loss_chunk_name(p.loss_chunk));
  f.add("--outer-steps", std::to_string(p.diloco.outer_steps));
  f.add("--outer-lr", exact(p.diloco.outer_lr));
  f.add("--outer-momentum", exact(p.diloco.outer_momentum));
  f.add("--outer-dtype", std::string(dtype_name(p.diloco.outer_dtype)));
  f.add("--outer-fragments", std::to_string(p.diloco.outer_fragments));
  f.add("--outer-delay", std::to_string(p.diloco.outer_delay));
  f.add("--outer-mix", exact(p.diloco.mix()));
  f.add("--executor", std::string(target_name(e.target)));
  // Fused kernels may round differently as regions grow (reductions), so the
  // ranks of one job fuse alike even though the collectives do not change.
  f.add("--fusion", std::string(fusion_mode_name(e.fusion)));
  f.add("--grad-accum", std::to_string(e.grad_accum));
  f.add("--pp-schedule", pipeline_schedule_name(e.pp_schedule));
  f.add("--no-sync", e.no_sync ? "on" : "off");
  f.add("--keep-gathered", e.keep_gathered ? "on" : "off");
  f.add("--optimizer", opt.kind == OptimizerOptions::Kind::adamw ? "adamw" : "sgd");
  f.add("--lr", exact(opt.lr));
  f.add("--beta1", exact(opt.beta1));
  f.add("--beta2", exact(opt.beta2));
  f.add("--eps", exact(opt.eps));
  f.add("--weight-decay", exact(opt.weight_decay));
  f.add("--momentum", exact(opt.momentum));
  f.add("--lr-schedule", lr_schedule_name(e.lr_schedule.kind));
  f.add("--warmup-steps", std::to_string(e.lr_schedule.warmup_steps));
  f.add("--decay-steps", std::to_string(e.lr_schedule.decay_steps));
  f.add("--min-lr", exact(e.lr_schedule.min_lr));
  f.add("--clip", exact(e.clip));
  f.add("--seed", std::to_string(e.seed));
  f.add("--steps", std::to_string(t.steps));
  f.add("--sampling", t.sampling == Sampling::random ? "random" : "sequential");
  f.add("--data", t.data.empty() ? "" : file_fingerprint(t.data));
  f.add("--val-data", t.val_data.empty() ? "" : file_fingerprint(t.val_data));
  f.add("--data-dtype", std::string(token_dtype_name(t.data_dtype)));
  f.add("--eval-every", std::to_string(t.eval_every));
  f.add("--eval-batches", std::to_string(t.eval_batches));
  f.add("--init", t.init.empty() ? "" : fs::is_directory(t.init) ? folder_fingerprint(t.init) : file_fingerprint(t.init));
  std::string resume;
  if (!t.resume.empty()) {
    const fs::path latest = fs::path(t.resume) / "state" / "latest";
    std::string name = fs::exists(latest) ? read_file(latest.string()) : "(no state/latest)";
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    resume = name + ": ";
    if (fs::is_directory(fs::path(t.resume) / "state" / name)) resume += folder_fingerprint(fs::path(t.resume) / "state" / name);
  }
  f.add("--resume", resume);
  f.add("--save", t.save);
  f.add("--save-every", std::to_string(t.save_every));
  f.add("--checkpoint", checkpoint_kind_name(t.checkpoint));
  // Profiling adds collectives (the clock barrier, the gather): all ranks or none.
  f.add("--profile", t.profile.empty() ? "off" : "on, steps " + (t.profile_steps.empty() ? "default" : t.profile_steps));
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
  if (t.outer && t.pipeline.empty())
    for (const OuterFragment& frag : t.outer->fragments)
      for (const Trace* part : frag.traces()) f.add_text("the outer trace " + part->name, print_trace(*part));
}

}  // namespace fsdpc
