// fsdpc advise: compile every strategy for N ranks, predict each one's
// per-rank peak memory (the memory plan), communication and step time (the
// step simulator on a hardware profile), and print them best first. Nothing
// runs (a table for gpt2-xl on 64 ranks takes seconds) unless --measure asks
// for a few real steps of each candidate here (tools/advise_measure.cpp).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "executors/claim.h"
#include "ir/error.h"
#include "passes/place.h"
#include "runtime/allocator.h"
#include "tools/advise.h"
#include "tools/cli_io.h"
#include "tools/commands.h"

namespace fsdpc::cli {

namespace {

using Json = nlohmann::ordered_json;

struct AdviseArgs {
  ModelSource src;
  int world = 0, threads = 0, measure_steps = 0;  // 0: auto_measure_steps
  bool measure = false, sequence_parallel = false;
  std::vector<std::string> strategies;
  std::vector<int> tps{1}, pps{1};
  int micro_batches = 0;
  std::string mesh, hardware = "local", mem_cap, precision, executor, format = "text", output;
};

// Tokens one rank trains on per step: batch x sequence for token ids, else
// the batch (rows of the first input).
int64_t tokens_per_rank(const Trace& t) {
  if (t.args.empty() || t.args[0].type.shape.empty()) return 1;
  const TensorType& x = t.args[0].type;
  const bool ids = x.dtype == DType::i64 || x.dtype == DType::i32;
  return ids && x.shape.size() >= 2 ? x.shape[0] * x.shape[1] : x.shape[0];
}

std::string human(double v) {
  char buf[32];
  if (v >= 1e9) std::snprintf(buf, sizeof buf, "%.2fG", v / 1e9);
  else if (v >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  else if (v >= 1e3) std::snprintf(buf, sizeof buf, "%.1fK", v / 1e3);
  else std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string comm_cell(const Candidate& c) {
  std::string s;
  for (const CommStream& st : c.sim.streams)
    s += (s.empty() ? "" : ", ") + st.group + (st.inter_node ? "*" : "") + " " +
         format_bytes(static_cast<int64_t>(st.bytes));
  return s.empty() ? "-" : s;
}

// The measured columns of a row: step time, predicted/measured, peak; or why not.
std::string measured_cells(const Measurement& m, const Candidate& c) {
  if (!m.ok()) return "  " + (m.error.empty() ? std::string("-") : (m.ran ? "run failed, " : "") + m.error);
  char cell[128];
  std::snprintf(cell, sizeof cell, " %11.3f %9.2f %13s", m.step_seconds * 1e3, c.sim.seconds / m.step_seconds,
                format_bytes(m.peak_bytes).c_str());
  return cell;
}

std::string render_text(const AdviseSetup& s, const std::string& model, const std::vector<Candidate>& cs,
                        const std::string& cap_source, double seconds, bool measured) {
  const int per_node = static_cast<int>(s.hw.gpus_per_node.value);
  std::string out = "fsdpc advise: " + model + " on " + std::to_string(s.world) + " ranks, " +
                    std::to_string(s.tokens_per_rank) + " tokens per rank a step" +
                    (s.tp_captured.empty() ? "" : " (tpT: a group of T ranks shares T times that)") +
                    (s.pp_captured.empty() ? "" : " (ppP mM: a stage rank trains P times that in M micro-batches, 1F1B)") +
                    ", " +
                    s.precision + " on the " +
                    s.executor + " executor\nhardware: " + s.hw.name + (s.hw.file.empty() ? "" : " (" + s.hw.file + ")") +
                    ", " + std::to_string(std::min(per_node, s.world)) + " ranks per node";
  out += s.cap > 0 ? "; cap " + format_bytes(s.cap) + " per rank (" + cap_source + ")\n" : "; no memory cap\n";
  char line[512];
  std::snprintf(line, sizeof line, "%3s  %-33s %11s %-5s %-40s %10s %11s %10s %6s", "#", "candidate", "peak/rank", "fits",
                "sent/rank/step (* crosses nodes)", "step ms", "exposed ms", "tokens/s", "MFU");
  out += line;
  if (measured) {
    std::snprintf(line, sizeof line, " %11s %9s %13s", "measured ms", "pred/meas", "measured peak");
    out += line;
  }
  out += "\n";
  for (size_t i = 0; i < cs.size(); ++i) {
    const Candidate& c = cs[i];
    std::snprintf(line, sizeof line, "%3zu  %-33s %11s %-5s %-40s %10.3f %11.3f %10s %5.1f%%", i + 1, c.name().c_str(),
                  format_bytes(c.peak_bytes).c_str(), c.fits ? "yes" : "no", comm_cell(c).c_str(), c.sim.seconds * 1e3,
                  c.sim.blocked * 1e3, human(c.tokens_per_second).c_str(), 100 * c.mfu);
    out += line + (measured ? measured_cells(c.measured, c) : std::string()) + "\n";
  }
  out += "best: " + winner_reason(cs, s.cap) + "\n";
  if (!cs.empty() && cs.front().fits) out += "flags: " + cs.front().flags() + "\n";
  std::snprintf(line, sizeof line, "%zu candidates compiled, planned and simulated in %.2f s (%d thread%s)\n", cs.size(),
                seconds, s.threads, s.threads == 1 ? "" : "s");
  out += line;
  if (measured) {
    size_t ok = 0, equal = 0;
    int fewest = 0, most = 0;
    for (const Candidate& c : cs) {
      ok += c.measured.ok();
      equal += c.measured.ok() && c.measured.peak_bytes == c.peak_bytes;
      if (!c.measured.ok()) continue;
      fewest = fewest ? std::min(fewest, c.measured.steps) : c.measured.steps;
      most = std::max(most, c.measured.steps);
    }
    const std::string counts = fewest == most ? std::to_string(most) : std::to_string(fewest) + "-" + std::to_string(most);
    std::snprintf(line, sizeof line,
                  "measured here: %zu of %zu candidates ran (mpirun -np %d fsdpc train, %s steps; the median step "
                  "after each run's warm-up); the measured peak equals the plan's in %zu of %zu\n",
                  ok, cs.size(), s.world, counts.c_str(), equal, ok);
    out += line;
  }
  return out;
}

Json measured_json(const Candidate& c) {
  const Measurement& m = c.measured;
  if (!m.ok()) return Json{{"ran", m.ran}, {"error", m.error}};
  return Json{{"ran", true},
              {"steps", m.steps},
              {"step_seconds", m.step_seconds},
              {"predicted_over_measured", c.sim.seconds / m.step_seconds},
              {"peak_bytes", m.peak_bytes},
              {"peak_matches", m.peak_bytes == c.peak_bytes}};
}

std::string render_json(const AdviseSetup& s, const std::string& model, const std::vector<Candidate>& cs, double seconds,
                        bool measured) {
  Json rows = Json::array();
  for (const Candidate& c : cs) {
    Json comm = Json::array();
    for (const CommStream& st : c.sim.streams)
      comm.push_back(Json{{"group", st.group}, {"size", st.size}, {"inter_node", st.inter_node}, {"count", st.count},
                          {"bytes", st.bytes}, {"seconds", st.busy}});
    rows.push_back(Json{{"candidate", c.name()},
                        {"strategy", c.strategy},
                        {"mesh", {c.mesh.replicas, c.mesh.shards}},
                        {"tp", c.mesh.tp},
                        {"sequence_parallel", c.sequence_parallel},
                        {"pp", c.pp},
                        {"micro_batches", c.micro_batches},
                        {"keep_gathered", c.keep_gathered},
                        {"bucketing", c.strategy == "no_shard" ? "none" : c.unit_buckets ? "unit" : "none"},
                        {"prefetch", c.prefetch},
                        {"flags", c.flags()},
                        {"peak_bytes", c.peak_bytes},
                        {"peak_at", c.peak_where},
                        {"fits", c.fits},
                        {"comm_bytes", c.sim.comm_bytes()},
                        {"comm", std::move(comm)},
                        {"step_seconds", c.sim.seconds},
                        {"compute_seconds", c.sim.compute},
                        {"matmul_seconds", c.sim.matmul},
                        {"comm_host_seconds", c.sim.comm_host},
                        {"optimizer_seconds", c.optimizer_seconds},
                        {"exposed_comm_seconds", c.sim.blocked},
                        {"flops", c.sim.flops},
                        {"tokens_per_second", c.tokens_per_second},
                        {"mfu", c.mfu}});
    if (measured) rows.back()["measured"] = measured_json(c);
  }
  Json j{{"model", model},
         {"world", s.world},
         {"tokens_per_rank", s.tokens_per_rank},
         {"precision", s.precision},
         {"executor", s.executor},
         {"hardware", Json{{"name", s.hw.name}, {"file", s.hw.file}, {"gpus_per_node", s.hw.gpus_per_node.value}}},
         {"cap_bytes", s.cap},
         {"candidates", std::move(rows)},
         {"best", winner_reason(cs, s.cap)},
         {"seconds", seconds}};
  return j.dump(2) + "\n";
}

// The executor the candidates compile for: --executor, else the profile's,
// else (a cuda profile in a build without CUDA) cpu, said on stderr.
std::string choose_executor(const AdviseArgs& a, const HardwareProfile& hw) {
  if (!a.executor.empty()) {
    executors_for(a.executor);  // an unknown name, or cuda in a CPU-only build, fails here
    return a.executor;
  }
  try {
    executors_for(hw.executor);
    return hw.executor;
  } catch (const Error&) {
    std::fprintf(stderr, "fsdpc advise: this build has no %s executor; compiling for cpu (memory rounds as the CPU's)\n",
                 hw.executor.c_str());
    return "cpu";
  }
}

// The model flags of `fsdpc train` that capture the trace advise compiled:
// train's --batch is the global one, advise's the per-rank one. The global
// batch is the same for every candidate, tp or not (AdviseSetup::tp_captured).
std::string train_model_flags(const ModelSource& src, const Trace& captured, int world) {
  std::string config = "'";  // for the shell, a ' in the path included
  for (char c : src.config) config += c == '\'' ? std::string("'\\''") : std::string(1, c);
  std::string f = src.model.empty() ? "--config " + config + "'" : "--model " + src.model;
  if (captured.args.empty() || captured.args[0].type.shape.empty()) return f;
  const TensorType& x = captured.args[0].type;
  f += " --batch " + std::to_string(x.shape[0] * world);
  const bool ids = x.dtype == DType::i64 || x.dtype == DType::i32;
  if (src.seq) f += " --seq " + std::to_string(src.seq);
  else if (ids && x.shape.size() >= 2) f += " --seq " + std::to_string(x.shape[1]);
  return f;
}

void run_advise(const AdviseArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  AdviseSetup s;
  s.world = a.world;
  s.mesh = a.mesh;
  s.strategies = a.strategies;
  s.sequence_parallel = a.sequence_parallel;
  s.tps = a.tps;  // each size once, smallest first
  std::sort(s.tps.begin(), s.tps.end());
  s.tps.erase(std::unique(s.tps.begin(), s.tps.end()), s.tps.end());
  s.pps = a.pps;
  std::sort(s.pps.begin(), s.pps.end());
  s.pps.erase(std::unique(s.pps.begin(), s.pps.end()), s.pps.end());
  s.micro_batches = a.micro_batches;
  const std::string mpirun = a.measure ? find_mpirun() : "";
  if (a.measure && mpirun.empty())
    fail("--measure runs each candidate under mpirun, and none was found (not on PATH; FSDPC_MPIRUN names one)");
  std::vector<Candidate> cs = enumerate_candidates(s);  // a --mesh that does not fit fails before measuring
  s.hw = load_hardware(a.hardware, a.world);
  s.executor = choose_executor(a, s.hw);
  s.precision = a.precision.empty() ? s.hw.precision : a.precision;
  if (s.precision != "f32" && s.executor == "cpu")
    fail("--precision ", s.precision, ": the cpu executor's kernels are f32 only (a cuda profile or --executor cuda runs bf16)");
  std::string cap_source = "--mem-cap";
  if (!a.mem_cap.empty()) s.cap = parse_mem_cap(a.mem_cap);
  else if (s.hw.memory_capacity.value > 0) {
    s.cap = static_cast<int64_t>(s.hw.memory_capacity.value);
    cap_source = "the profile's compute.memory_capacity";
  }
  s.threads = a.threads > 0 ? a.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  s.captured = place(load_source_trace(a.src), executor_device(s.executor));
  s.tokens_per_rank = tokens_per_rank(s.captured);
  for (int tp : s.tps) {
    if (tp == 1 || s.tp_captured.count(tp) || s.captured.args.empty() || s.captured.args[0].type.shape.empty()) continue;
    ModelSource shared = a.src;
    shared.batch = s.captured.args[0].type.shape[0] * tp;
    s.tp_captured.emplace(tp, place(load_source_trace(shared), executor_device(s.executor)));
  }
  prepare_pipelines(s, cs, [&](int64_t batch) {
    ModelSource micro = a.src;
    micro.batch = batch;
    return place(load_source_trace(micro), executor_device(s.executor));
  });
  // Under local, the matmuls of the candidates are timed here on their own
  // shapes (once: they are cached with the profile), then the candidates
  // are priced again with them. Only the cpu executor's kernels run here.
  MatmulShapes unmeasured;
  if (a.hardware == "local" && s.executor == "cpu") s.unmeasured = &unmeasured;
  const std::vector<Candidate> unevaluated = s.unmeasured ? cs : std::vector<Candidate>{};
  evaluate_candidates(s, cs);
  double measuring = 0;
  if (std::map<std::string, MatmulSample> samples = unmeasured.take(); !samples.empty()) {
    const auto m0 = std::chrono::steady_clock::now();
    measure_matmul_shapes(s.hw, samples, s.world);
    measuring = std::chrono::duration<double>(std::chrono::steady_clock::now() - m0).count();
    s.unmeasured = nullptr;
    cs = unevaluated;
    evaluate_candidates(s, cs);
  }
  rank_candidates(cs);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - measuring;
  if (a.measure) measure_candidates(s, mpirun, train_model_flags(a.src, s.captured, s.world), a.measure_steps, cs);
  const std::string model = a.src.model.empty() ? a.src.config : a.src.model;
  write_output(a.output, a.format == "json" ? render_json(s, model, cs, seconds, a.measure)
                                            : render_text(s, model, cs, cap_source, seconds, a.measure));
}

}  // namespace

Command add_advise_command(CLI::App& app) {
  auto a = std::make_shared<AdviseArgs>();
  CLI::App* cmd = app.add_subcommand(
      "advise",
      "Compile every strategy for N ranks and rank them by predicted step time and peak memory (--measure: and run each)");
  add_model_options(cmd, a->src, /*allow_trace_file=*/false);
  cmd->add_option("--world-size", a->world, "Number of ranks")->required()->check(whole_number(1));
  cmd->add_option("--mesh", a->mesh, "R,S: the hybrid strategies on this mesh only (default: every R x S = N, R, S > 1)");
  cmd->add_option("--hardware", a->hardware,
                  "local (this host, measured and cached) | a profile name (hardware/NAME.json) | a .json file")
      ->capture_default_str();
  cmd->add_option("--mem-cap", a->mem_cap, "Per-rank memory cap, e.g. 80G (default: the profile's memory capacity)");
  cmd->add_option("--precision", a->precision, "f32 | bf16 (default: the profile's)")->check(CLI::IsMember({"f32", "bf16"}));
  cmd->add_option("--executor", a->executor, "cpu | cuda: what the candidates compile for (default: the profile's)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--strategies", a->strategies, "Only these strategies, e.g. zero3,no_shard (default: all)")
      ->delimiter(',');
  cmd->add_option("--tp", a->tps,
                  "Tensor-parallel sizes to compile every strategy at, e.g. 1,2,4 (each must divide --world-size; "
                  "default 1: none)")
      ->delimiter(',');
  cmd->add_option("--pp", a->pps,
                  "Pipeline sizes to compile zero3, zero2 and no_shard at, e.g. 1,2,4 (stages of world / (P x T) "
                  "ranks, 1F1B; default 1: none)")
      ->delimiter(',');
  cmd->add_option("--micro-batches", a->micro_batches,
                  "Micro-batches a step of each --pp candidate (default: the most up to 4P that divide a stage "
                  "rank's rows)")
      ->check(whole_number(1));
  cmd->add_flag("--sequence-parallel", a->sequence_parallel,
                "Also compile every --tp candidate above 1 with sequence parallelism (rows '... sp')");
  auto* measure = cmd->add_flag("--measure", a->measure,
                                "Also run each candidate that fits here (mpirun -np N fsdpc train) and print measured "
                                "step time and peak beside the predicted");
  cmd->add_option("--measure-steps", a->measure_steps,
                  "Steps each --measure run trains, one run a candidate; the first (and in a run of 4 or more the "
                  "second) is left out of the time (default: about a second of steps by the predicted step time, "
                  "5 to 1000, in three rounds over the candidates)")
      ->check(whole_number(1, 100000))
      ->needs(measure);
  cmd->add_option("--threads", a->threads, "Candidates compiled at once (default: the cores)")->check(whole_number(1, 256));
  cmd->add_option("--format", a->format, "Output form")->check(CLI::IsMember({"text", "json"}))->capture_default_str();
  cmd->add_option("-o,--output", a->output, "Write to FILE instead of standard output");
  return Command{cmd, [a] { run_advise(*a); }, [a] { check_model_source(a->src, false); }};
}

}  // namespace fsdpc::cli
