// The planner's reports: the table `fsdpc advise` prints and its JSON form
// (runtime/planner/planner.h).
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "runtime/allocator.h"
#include "runtime/planner/planner.h"

namespace fsdpc {

namespace {

using Json = nlohmann::ordered_json;

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

Json measured_json(const Candidate& c) {
  const Measurement& m = c.measured;
  if (!m.ok()) return Json{{"ran", m.ran}, {"error", m.error}};
  Json j{{"ran", true},
         {"steps", m.steps},
         {"step_seconds", m.step_seconds},
         {"predicted_over_measured", c.sim.seconds / m.step_seconds},
         {"peak_bytes", m.peak_bytes},
         {"peak_matches", m.peak_bytes == c.peak_bytes}};
  if (m.round_steps > 0)  // DiLoCo: how its exchanges were counted
    j["diloco"] = Json{{"round_steps", m.round_steps}, {"rounds", m.rounds}, {"outer_seconds", m.outer_seconds}};
  return j;
}

}  // namespace

namespace {

std::string link_rate(double bytes_per_second) {
  char text[64];
  const double bits = 8 * bytes_per_second;
  if (bits >= 1e9) std::snprintf(text, sizeof text, "%.2f Gbit/s", bits / 1e9);
  else std::snprintf(text, sizeof text, "%.0f Mbit/s", bits / 1e6);
  return text;
}

// With --outer-steps or --gather-dtype int8: the fastest candidate that
// fits and moves every byte exactly (synchronous, its parameters' own
// dtype), the fastest DiLoCo one and the fastest with int8 gathers, and the
// link between nodes each needs to keep 90% of its speed on an unlimited
// one; the exact one wins above the link from which it is within 10% of
// the others' step, at which its optimisation is the exact one.
std::string slow_link_text(const AdviseSetup& s, const std::vector<Candidate>& cs) {
  if (!s.diloco.enabled() && !s.int8_gathers) return "";
  const Candidate *exact = nullptr, *diloco = nullptr, *int8 = nullptr;
  for (const Candidate& c : cs) {
    if (!c.fits || c.link_for_90 <= 0) continue;
    const Candidate*& best = c.diloco.enabled() ? diloco : c.int8_gathers ? int8 : exact;
    if (!best) best = &c;  // ranked: the first is the fastest
  }
  if (!exact || (!diloco && !int8))
    return "slow links: no pair of exact and DiLoCo or int8-gather candidates whose traffic crosses nodes\n";
  std::string text = "slow links (this profile's: " + link_rate(s.hw.inter_node.bandwidth.value) +
                     " between nodes): " + exact->name() + " keeps 90% of its speed down to " +
                     link_rate(exact->link_for_90);
  if (diloco)
    text += ", " + diloco->name() + " down to " + link_rate(diloco->link_for_90) +
            " (its replicas drift apart for " + std::to_string(diloco->diloco.outer_steps) + " steps)";
  if (int8) text += ", " + int8->name() + " down to " + link_rate(int8->link_for_90) + " (its weights gathered to 1/254 of each block's largest)";
  return text + "; below the first, fewer or narrower exchanges win\n";
}

}  // namespace

std::string plan_table(const Plan& p, const std::string& model, bool measured) {
  const AdviseSetup& s = p.setup;
  const std::vector<Candidate>& cs = p.candidates;
  const std::string& cap_source = p.cap_source;
  const double seconds = p.seconds;
  const int per_node = static_cast<int>(s.hw.gpus_per_node.value);
  std::string out = "fsdpc advise: " + model + " on " + std::to_string(s.world) + " ranks, " +
                    std::to_string(s.tokens_per_rank) + " tokens per rank a step" +
                    (s.tp_captured.empty() ? "" : " (tpT: a group of T ranks shares T times that)") +
                    (s.pp_captured.empty() ? "" : " (ppP mM: a stage rank trains P times that in M micro-batches, 1F1B)") +
                    ", " + std::string(dtype_name(s.precision)) + " on the " +
                    std::string(target_name(s.target)) + " executor\nhardware: " + s.hw.name + (s.hw.file.empty() ? "" : " (" + s.hw.file + ")") +
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
  out += slow_link_text(s, cs);
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
    for (const Candidate& c : cs) {
      const Measurement& m = c.measured;
      if (!m.ok() || m.round_steps == 0) continue;
      if (m.rounds > 0)
        std::snprintf(line, sizeof line,
                      "  %s met every %d steps: the median step without an exchange, plus %.1f ms a round (over %d "
                      "rounds) spread over %d steps\n",
                      c.name().c_str(), m.round_steps, m.outer_seconds * 1e3, m.rounds, c.diloco.outer_steps);
      else
        std::snprintf(line, sizeof line,
                      "  %s met every %d steps, but no run held a whole round after its first: its step leaves the "
                      "exchanges out (--measure-steps at least %d counts them)\n",
                      c.name().c_str(), m.round_steps, 2 * m.round_steps);
      out += line;
    }
  }
  return out;
}

std::string plan_json(const Plan& p, const std::string& model, bool measured) {
  const AdviseSetup& s = p.setup;
  const std::vector<Candidate>& cs = p.candidates;
  const double seconds = p.seconds;
  Json rows = Json::array();
  for (const Candidate& c : cs) {
    Json comm = Json::array();
    for (const CommStream& st : c.sim.streams)
      comm.push_back(Json{{"group", st.group}, {"size", st.size}, {"inter_node", st.inter_node}, {"count", st.count},
                          {"bytes", st.bytes}, {"seconds", st.busy}});
    rows.push_back(Json{{"candidate", c.name()},
                        {"strategy", strategy_name(c.strategy)},
                        {"mesh", {c.mesh.replicas, c.mesh.shards}},
                        {"tp", c.mesh.tp},
                        {"sequence_parallel", c.sequence_parallel},
                        {"pp", c.pp},
                        {"micro_batches", c.micro_batches},
                        {"keep_gathered", c.keep_gathered},
                        {"bucketing", c.strategy == Strategy::no_shard ? "none" : c.unit_buckets ? "unit" : "none"},
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
    if (c.diloco.enabled())
      rows.back()["diloco"] = Json{{"outer_steps", c.diloco.outer_steps},
                                   {"outer_dtype", outer_dtype_name(c.diloco.outer_dtype)},
                                   {"outer_fragments", c.diloco.outer_fragments},
                                   {"outer_delay", c.diloco.outer_delay},
                                   {"outer_seconds", c.outer_seconds}};
    if (c.link_for_90 > 0) rows.back()["link_for_90pct_bytes_per_second"] = c.link_for_90;
    if (c.int8_gathers) rows.back()["gather_dtype"] = "int8";
    if (measured) rows.back()["measured"] = measured_json(c);
  }
  Json j{{"model", model},
         {"world", s.world},
         {"tokens_per_rank", s.tokens_per_rank},
         {"precision", dtype_name(s.precision)},
         {"executor", std::string(target_name(s.target))},
         {"hardware", Json{{"name", s.hw.name}, {"file", s.hw.file}, {"gpus_per_node", s.hw.gpus_per_node.value}}},
         {"cap_bytes", s.cap},
         {"candidates", std::move(rows)},
         {"best", winner_reason(cs, s.cap)},
         {"seconds", seconds}};
  return j.dump(2) + "\n";
}


}  // namespace fsdpc
