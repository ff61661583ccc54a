// Private to runtime/planner/memory_plan.cpp: one step's replay on the
// allocator model (StepReplay: the engine's actions recorded as points,
// phase by phase), and the engine state a replay carries from step to step
// (RankState). memory_plan.cpp mirrors the engine's code with them.
#pragma once

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/printer.h"
#include "runtime/planner/allocator_model.h"
#include "runtime/planner/memory_plan.h"

namespace fsdpc::planner_detail {

inline int64_t bytes_of(const TensorType& t) { return numel(t.shape) * dtype_size(t.dtype); }

// "t80 = cpu_linear(t3, t9)": a statement on one line, without its decomposition.
inline std::string one_line(const BoundSymbol& b) {
  std::string s;
  for (size_t i = 0; i < b.outputs.size(); ++i) s += (i ? ", " : "") + b.outputs[i].name;
  s += b.op == OpId::Del ? "del " : (s.empty() ? "" : " = ") + symbol_name(b.op, b.executor) + "(";
  for (size_t i = 0; i < b.inputs.size(); ++i)
    s += (i ? ", " : "") + (b.inputs[i].is_scalar() ? format_double(*b.inputs[i].scalar) : b.inputs[i].name);
  return b.op == OpId::Del ? s : s + ")";
}

// A returned value: its block and its type.
struct Held {
  int id;
  TensorType type;
};

// One step's replay: the engine's actions, each recorded as a point. With
// `peaks_only` each phase keeps only its first highest point, and a
// statement's text is written once the step ends (its trace still lives),
// not at every statement: advise plans a hundred candidates and reads only
// the peak and where it is.
class StepReplay {
 public:
  StepReplay(AllocatorModel& mem, StepMemory& out, bool peaks_only)
      : mem_(mem), out_(out), peaks_only_(peaks_only) {
    out_.start = mem.live();
    out_.peak = mem.live();
    out_.total_peak = mem.total();
    phase("step start");
    point(0, "live before the step");
  }

  void phase(std::string name) {
    out_.phases.push_back({std::move(name), {}});
    pending_.push_back(nullptr);
  }

  // After an engine action.
  void point(int64_t statement, std::string what) { add_point(statement, nullptr, std::move(what)); }
  // After statement `b`.
  void point(int64_t statement, const BoundSymbol& b) {
    if (peaks_only_) add_point(statement, &b, {});
    else add_point(statement, nullptr, one_line(b));
  }

  // Writes the text of the statements the kept points name (peaks_only).
  void finish() {
    for (size_t i = 0; i < pending_.size(); ++i)
      if (pending_[i]) out_.phases[i].points.at(0).what = one_line(*pending_[i]);
    pending_.clear();
  }

  // Interpreter::run: `args` are handed over (one reference each); the
  // returned values come back with one reference each.
  std::vector<Held> run(const Trace& t, const std::vector<int>& args) {
    FSDPC_CHECK(args.size() == t.args.size()) << "memory plan: " << t.name << " argument count";
    std::unordered_map<std::string, int> env;
    env.reserve(t.args.size() + t.bsyms.size());
    for (size_t i = 0; i < args.size(); ++i) env[t.args[i].name] = args[i];
    std::unordered_map<std::string, const TensorType*> types;  // into `t`, which outlives the replay
    types.reserve(t.args.size() + t.bsyms.size());
    for (const Proxy& a : t.args) types[a.name] = &a.type;
    for (size_t i = 0; i < t.bsyms.size(); ++i) {
      const BoundSymbol& b = t.bsyms[i];
      if (b.op == OpId::Del) {
        for (const Operand& o : b.inputs)
          if (auto it = env.find(o.name); it != env.end()) {
            mem_.drop(it->second);
            env.erase(it);
          }
      } else {
        for (const Proxy& p : b.outputs) {
          int id;
          if (b.op == OpId::Wait || b.op == OpId::Reshape) {  // the input's buffer
            id = env.at(b.inputs.at(0).name);
            mem_.hold(id);
          } else {
            id = mem_.allocate(bytes_of(p.type), p.type.future ? MemCategory::communication : MemCategory::activations);
          }
          env[p.name] = id;
          types[p.name] = &p.type;
        }
        kernel_scratch(b, types, static_cast<int64_t>(i) + 1);
        if (b.op == OpId::Wait) {  // the future's name goes; its buffer lives under the wait's
          auto it = env.find(b.inputs.at(0).name);
          mem_.drop(it->second);
          env.erase(it);
        }
      }
      point(static_cast<int64_t>(i) + 1, b);
    }
    std::vector<std::string> names;
    t.returns.collect_names(names);
    std::vector<Held> results;
    for (const std::string& n : names) {
      const int id = env.at(n);
      mem_.hold(id);
      results.push_back({id, *types.at(n)});
    }
    for (auto& [name, id] : env) mem_.drop(id);  // the environment goes out of scope
    point(0, "end of " + t.name + ": values neither freed nor returned go");
    return results;
  }

  AllocatorModel& mem() { return mem_; }

 private:
  // Interpreter::run: a kernel's scratch (KernelContext::scratch_pool) lives
  // while it runs, beside its outputs: a point of its own, "(during)".
  void kernel_scratch(const BoundSymbol& b, const std::unordered_map<std::string, const TensorType*>& types,
                      int64_t statement) {
    if (b.executor.empty()) return;
    std::vector<const TensorType*> in;
    for (const Operand& o : b.inputs) in.push_back(o.is_scalar() ? nullptr : types.at(o.name));
    const int64_t bytes = mem_.scratch_of(b, in);
    if (bytes == 0) return;
    const int id = mem_.allocate(bytes, MemCategory::activations);
    if (peaks_only_) add_point(statement, &b, {});
    else add_point(statement, nullptr, one_line(b) + " (during: " + format_bytes(bytes) + " of kernel scratch)");
    mem_.drop(id);
  }

  void add_point(int64_t statement, const BoundSymbol* b, std::string what) {
    MemoryPhase& ph = out_.phases.back();
    const bool first_of_step = out_.phases.size() == 1 && ph.points.empty();
    for (size_t c = 0; c < kNumMemCategories; ++c) out_.peak[c] = std::max(out_.peak[c], mem_.live()[c]);
    if (peaks_only_ && !ph.points.empty() && mem_.total() <= ph.points[0].total) return;
    if (peaks_only_) {
      ph.points.assign(1, {statement, std::move(what), mem_.live(), mem_.total(), mem_.reserved()});
      pending_.back() = b;
    } else {
      ph.points.push_back({statement, std::move(what), mem_.live(), mem_.total(), mem_.reserved()});
    }
    if (mem_.total() > out_.total_peak || first_of_step) {
      out_.total_peak = mem_.total();
      out_.peak_phase = out_.phases.size() - 1;
      out_.peak_point = ph.points.size() - 1;
    }
  }

  AllocatorModel& mem_;
  StepMemory& out_;
  bool peaks_only_;
  std::vector<const BoundSymbol*> pending_;  // per phase: the statement its kept point follows
};

struct ParamBlock {
  std::string proxy;  // the forward argument's name (param_proxy_name of the path)
  int id;
  bool requires_grad;
};

// The engine's persistent state: parameters from construction on, optimizer
// state from the first update on.
struct RankState {
  std::vector<ParamBlock> params;
  bool has_optimizer_state = false;
  // keep_gathered: the full parameters by proxy name, from the step's
  // gather to its reduce (Engine::gathered_values_).
  std::unordered_map<std::string, int> gathered;
  // DiLoCo: the anchors and outer momenta, by outer parameter proxy, from
  // the first step's start on (Engine::start_outer_round), and the
  // exchanges in flight (Engine::OuterExchange).
  std::unordered_map<std::string, int> anchors, momenta;
  struct Exchange {
    size_t fragment;
    int64_t lands_at;
    bool landed;
    std::vector<Held> held;
  };
  std::vector<Exchange> in_flight;
};

}  // namespace fsdpc::planner_detail
