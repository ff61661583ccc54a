// The training run's report lines (frontend/trainer/train_log.h).
#include "frontend/trainer/train_log.h"

#include <cstdio>
#include <sstream>

#include "executors/claim.h"
#include "executors/cpu/cpu_executor.h"
#include "passes/strategy.h"
#include "runtime/lr_schedule.h"
#include "runtime/pipeline_schedule.h"

namespace fsdpc {

std::string format_duration(double s) {
  char buf[32];
  if (s < 1) std::snprintf(buf, sizeof buf, "%.0fms", s * 1e3);
  else if (s < 60) std::snprintf(buf, sizeof buf, "%.1fs", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  else std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s / 3600), static_cast<int>(s / 60) % 60);
  return buf;
}

std::string train_header(const TrainOptions& o, const Model& model, int world, int64_t first_step) {
  const EngineOptions& e = o.engine;
  std::string executor(target_name(e.target));
  if (e.target == Target::cpu) {
    const int t = cpu_threads();
    executor += ": " + std::to_string(t) + " thread" + (t == 1 ? "" : "s") + " per rank; " + cpu_backend_info();
    if (o.pipeline.precision == DType::bf16) executor += "; " + cpu_bf16_matmul_info();
  }
  const std::string strategy(strategy_name(o.pipeline.strategy));
  const int tp = o.pipeline.mesh.tp, pp = o.pipeline.pp;
  std::string layout = tp > 1 ? strategy + " on " + std::to_string(world / pp / tp) + " data-parallel ranks x tp " +
                                    std::to_string(tp)
                              : strategy;
  if (pp > 1)
    layout += " x pp " + std::to_string(pp) + " (" + pipeline_schedule_name(e.pp_schedule) + ", " +
              std::to_string(e.grad_accum) + " micro-batches)";
  if (e.keep_gathered) layout += ", parameters gathered once a step";
  if (const DilocoOptions& d = o.pipeline.diloco; d.enabled()) {
    std::ostringstream diloco;
    diloco << ", DiLoCo: " << o.pipeline.mesh.replicas << " replicas meet every " << d.outer_steps
           << " steps (outer Nesterov SGD lr " << d.outer_lr << ", momentum " << d.outer_momentum << "; "
           << dtype_name(d.outer_dtype) << " between replicas";
    if (d.streaming())
      diloco << "; streaming: " << d.outer_fragments << " fragment" << (d.outer_fragments == 1 ? "" : "s")
             << " at staggered steps, each exchange in flight for " << d.outer_delay << " step"
             << (d.outer_delay == 1 ? "" : "s") << ", landed with mix " << d.mix();
    diloco << ")";
    layout += diloco.str();
  }
  std::ostringstream out;
  out << "train " << model.name() << ": " << world << " rank" << (world == 1 ? "" : "s") << ", " << layout
      << ", executor " << executor << "\n";
  const OptimizerOptions& opt = e.optimizer;
  const bool adamw = opt.kind == OptimizerOptions::Kind::adamw;
  out << "  " << (adamw ? "adamw" : "sgd") << " lr " << opt.lr;
  if (adamw) out << ", betas (" << opt.beta1 << ", " << opt.beta2 << "), eps " << opt.eps;
  else if (opt.momentum != 0) out << ", momentum " << opt.momentum;
  out << ", weight decay " << opt.weight_decay << "; schedule " << lr_schedule_name(e.lr_schedule.kind);
  if (e.lr_schedule.warmup_steps > 0) out << ", warmup " << e.lr_schedule.warmup_steps << " steps";
  if (e.lr_schedule.kind != LrSchedule::Kind::constant)
    out << ", decay to " << e.lr_schedule.min_lr << " by step " << e.lr_schedule.decay_steps;
  out << "; steps " << first_step << " to " << o.steps << "\n";
  return out.str();
}

std::string step_line(const StepRecord& r) {
  char val[48] = "";
  if (r.val_loss) std::snprintf(val, sizeof val, "  val %.4f", *r.val_loss);
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "step %4lld  loss %.4f%s  lr %.3e  %7.2f ms  %8.0f tok/s  peak %s per rank  %lld/%lld  %s elapsed, eta %s",
                static_cast<long long>(r.step), r.result.loss, val, r.result.lr, r.result.seconds * 1e3, r.tokens_per_s,
                format_bytes(r.memory.total_peak).c_str(), static_cast<long long>(r.done),
                static_cast<long long>(r.total), format_duration(r.elapsed_s).c_str(), format_duration(r.eta_s).c_str());
  return buf;
}

std::string memory_line(const StepRecord& r) {
  return "memory: peak " + format_bytes(r.memory.total_peak) + " per rank measured, " +
         format_bytes(r.predicted_total) + " predicted by the plan (peak at " + r.predicted_where + "); reserved " +
         format_bytes(r.reserved);
}

std::string step_json(const StepRecord& r) {
  std::ostringstream js;
  js.precision(9);
  const StepResult& s = r.result;
  js << "{\"step\": " << r.step << ", \"loss\": " << s.loss << ", \"grad_norm\": " << s.grad_norm
     << ", \"lr\": " << s.lr << ", \"step_ms\": " << s.seconds * 1e3 << ", \"tokens_per_s\": " << r.tokens_per_s
     << ", \"steps_done\": " << r.done << ", \"steps_total\": " << r.total << ", \"elapsed_s\": " << r.elapsed_s
     << ", \"eta_s\": " << r.eta_s << ", \"peak_bytes\": {";
  for (size_t c = 0; c < kNumMemCategories; ++c)
    js << (c ? ", " : "") << "\"" << mem_category_name(static_cast<MemCategory>(c)) << "\": " << r.memory.peak[c];
  js << ", \"total\": " << r.memory.total_peak << "}";
  if (!s.collectives.empty()) {  // device time per kind, where measured
    js << ", \"collectives\": {";
    for (size_t i = 0; i < s.collectives.size(); ++i) {
      const CollectiveTime& c = s.collectives[i];
      js << (i ? ", " : "") << "\"" << c.kind << "\": {\"count\": " << c.count << ", \"bytes\": " << c.bytes
         << ", \"ms\": " << c.ms << "}";
    }
    js << "}";
  }
  if (s.outer) js << ", \"outer_step\": true";  // DiLoCo: the replicas met after this step's update
  if (r.val_loss) js << ", \"val_loss\": " << *r.val_loss;  // full precision, not std::to_string's six decimals
  js << ", \"predicted_peak_bytes\": " << peak_bytes_json(r.predicted, r.predicted_total)
     << ", \"reserved_bytes\": " << r.reserved;
  if (r.predicted_reserved) js << ", \"predicted_reserved_bytes\": " << *r.predicted_reserved;
  js << "}";
  return js.str();
}

}  // namespace fsdpc
