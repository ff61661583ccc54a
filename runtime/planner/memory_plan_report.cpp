// The memory plan for people (a table per step) and for tools (JSON), and
// the refusal of a --mem-cap below the plan's peak.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "executors/claim.h"
#include "runtime/planner/memory_plan.h"

namespace fsdpc {

namespace {

using Json = nlohmann::ordered_json;

Json bytes_json(const MemBytes& b, int64_t total) {
  Json j = Json::object();
  for (size_t c = 0; c < kNumMemCategories; ++c) j[std::string(mem_category_name(static_cast<MemCategory>(c)))] = b[c];
  j["total"] = total;
  return j;
}

Json point_json(const MemoryPoint& p) {
  return Json{{"statement", p.statement}, {"what", p.what}, {"live", bytes_json(p.live, p.total)}, {"reserved", p.reserved}};
}

Json step_json(const StepMemory& s) {
  Json phases = Json::array();
  for (const MemoryPhase& ph : s.phases) {
    Json points = Json::array();
    for (const MemoryPoint& p : ph.points) points.push_back(point_json(p));
    phases.push_back(Json{{"name", ph.name},
                          {"peak", point_json(ph.points.at(ph.peak_point()))},
                          {"end", point_json(ph.points.back())},
                          {"points", std::move(points)}});
  }
  const MemoryPoint& at = s.peak_at();
  return Json{{"peak_bytes", bytes_json(s.peak, s.total_peak)},
              {"peak_at", Json{{"phase", s.phases.at(s.peak_phase).name}, {"statement", at.statement}, {"what", at.what},
                               {"live", bytes_json(at.live, at.total)}}},
              {"start", bytes_json(s.start, [&] {
                 int64_t t = 0;
                 for (int64_t b : s.start) t += b;
                 return t;
               }())},
              {"reserved", s.reserved},
              {"phases", std::move(phases)}};
}

std::string cell(int64_t bytes) {
  char buf[24];
  std::snprintf(buf, sizeof buf, " %12s", bytes ? format_bytes(bytes).c_str() : "-");
  return buf;
}

std::string row(const std::string& phase, const std::string& at, const MemoryPoint& p) {
  char head[80];
  std::snprintf(head, sizeof head, "  %-26s %-10s", phase.c_str(), at.c_str());
  std::string out = head;
  for (int64_t b : p.live) out += cell(b);
  return out + cell(p.total) + cell(p.reserved) + "\n";
}

std::string step_text(const std::string& title, const StepMemory& s) {
  std::string out = title + "\n";
  char head[80];
  std::snprintf(head, sizeof head, "  %-26s %-10s", "phase", "at");
  out += head;
  for (size_t c = 0; c < kNumMemCategories; ++c) {
    std::string name(mem_category_name(static_cast<MemCategory>(c)));
    if (name.size() > 12) name = name.substr(0, 9) + "...";  // optimizer_state
    char buf[24];
    std::snprintf(buf, sizeof buf, " %12s", name.c_str());
    out += buf;
  }
  out += "        total     reserved\n";
  for (const MemoryPhase& ph : s.phases) {
    const size_t k = ph.peak_point();
    const MemoryPoint& p = ph.points[k];
    if (ph.points.size() > 1)
      out += row(ph.name, p.statement ? "peak #" + std::to_string(p.statement) : "peak", p);
    out += row(ph.points.size() > 1 ? "" : ph.name, "end", ph.points.back());
  }
  out += "  peak " + format_bytes(s.total_peak) + " (" + std::to_string(s.total_peak) + " B) at " + s.peak_where() + "\n";
  out += "  each category's own peak:";
  for (size_t c = 0; c < kNumMemCategories; ++c)
    out += std::string(c ? "," : "") + " " + std::string(mem_category_name(static_cast<MemCategory>(c))) + " " +
           format_bytes(s.peak[c]);
  return out + "\n";
}

}  // namespace

std::string peak_bytes_json(const MemBytes& peak, int64_t total) { return bytes_json(peak, total).dump(); }

std::string mem_cap_refusal(const MemoryPlan& plan, int64_t cap_bytes) {
  const StepMemory& s = plan.worst();
  if (s.total_peak <= cap_bytes) return "";
  std::string live;
  const MemoryPoint& at = s.peak_at();
  for (size_t c = 0; c < kNumMemCategories; ++c)
    if (at.live[c])
      live += (live.empty() ? "" : ", ") + std::string(mem_category_name(static_cast<MemCategory>(c))) + " " +
              format_bytes(at.live[c]);
  return "out of memory on " + device_name(target_device(plan.target)) + ", predicted before running: the memory " +
         "plan's peak of " + format_bytes(s.total_peak) + " (" + std::to_string(s.total_peak) + " B) per rank would " +
         "exceed the " + format_bytes(cap_bytes) + " cap at " + s.peak_where() + " (live: " + live +
         "); `fsdpc dump --memory` shows the plan, and activation checkpointing (--remat block, selective or " +
         "auto:BYTES) trades recomputation for activation memory";
}

std::string memory_plan_text(const MemoryPlan& plan) {
  std::string out = "memory plan per rank (every rank runs the same traces on shards of the same shape): executor " +
                    std::string(target_name(plan.target)) + ", blocks rounded to " + std::to_string(plan.alignment) + " B, " +
                    std::to_string(plan.grad_accum) + " micro-batch" + (plan.grad_accum == 1 ? "" : "es") +
                    (plan.no_sync ? " (no_sync)" : "") + "\n";
  out += step_text("steady step (every step after the first; the optimizer state is live throughout):", plan.steady);
  out += step_text("\nfirst step (the optimizer state is made at its update):", plan.first);
  if (plan.outer)
    out += step_text(plan.streaming.empty()
                         ? "\nDiLoCo round's last step (the outer step after the update):"
                         : "\nStreaming DiLoCo's highest step (fragments' exchanges issued, in flight or landed):",
                     *plan.outer);
  out += step_text("\nevaluation forward (fsdpc train --val-data, between steps):", plan.evaluation);
  out += "\nreserved by the caching allocator after each step:";
  for (size_t i = 0; i < plan.reserved_after_step.size(); ++i)
    out += (i ? ", " : " ") + format_bytes(plan.reserved_after_step[i]);
  const int64_t settled = plan.reserved_after_step.back();
  out += "; settled " + format_bytes(settled) + " (" + std::to_string(settled) + " B), " +
         format_bytes(settled - plan.steady.total_peak) + " above the live peak (rounding and blocks of other sizes)\n";
  return out;
}

std::string memory_plan_json(const MemoryPlan& plan) {
  Json j{{"executor", std::string(target_name(plan.target))},
         {"alignment", plan.alignment},
         {"grad_accum", plan.grad_accum},
         {"no_sync", plan.no_sync},
         {"steady", step_json(plan.steady)},
         {"first", step_json(plan.first)},
         {"evaluation", step_json(plan.evaluation)},
         {"reserved_after_step", plan.reserved_after_step}};
  if (plan.outer) j["outer"] = step_json(*plan.outer);
  return j.dump(2) + "\n";
}

}  // namespace fsdpc
