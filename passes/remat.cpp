// remat: chooses which forward values the backward recomputes (activation
// checkpointing). It does not rewrite a trace: split() asks it, then places
// every recomputed statement in the backward right before its first use (after
// the re-gather zero3 already does), so the schedule and del passes see the
// recomputation like any other statement.
//
// Pre:  a joint trace from grad(); the FSDP units of its parameters.
// Post: a set of forward-defined names the backward may recompute. Every
//       value in it can be recomputed from values that are saved, from
//       arguments, or from other values in it; collectives and waits are
//       never in it (a gathered parameter is re-gathered only where split's
//       regather rule allows, whatever the mode).
//
// Modes (what is saved; the rest of what the backward reads is recomputed):
//   block      each checkpointed unit's boundary values: those defined in the
//              unit and read by a statement outside it (its output, which is
//              the next unit's input). Statements belong to the unit whose
//              parameters they read; a statement reading none stays in the
//              unit before it (the residual add after a block's MLP).
//   selective  within checkpointed units as block mode, but also the outputs
//              of matmul, linear and attention, a matmul's bias add included
//              (torchtitan's op-level SAC:
//              the unit's input stays saved, so cheap chains such as the
//              residual stream are recomputed from it, never from the model's input).
//   auto_cut   a minimum s-t cut of the forward's data flow, each value's
//              save edge weighted by its bytes; matmul, linear, attention and
//              index_add are banned from recomputation, and parameters are
//              free to re-read. Ties go to saving the value closest to its
//              use, so a chain (the residual stream) is never recomputed to
//              save an equally large value.
//
//   block, gpt2 block h.3:  saved: x3 (h.3's input; h.2's output)
//                           recomputed in h.3's backward: ln_1(x3), the q|k|v projection, attention, ..., x4
#include "passes/remat.h"

#include <algorithm>
#include <limits>
#include <queue>
#include <unordered_map>

#include "ir/error.h"
#include "passes/split.h"

namespace fsdpc {

namespace {

using NameSet = std::unordered_set<std::string>;

bool is_communication(OpId op) { return op_info(op).category == OpCategory::collective; }

// Recomputing these costs FLOPs comparable to the layer itself.
// So does communication (every collective), and packing its buffers.
bool is_expensive(OpId op) {
  if (op == OpId::Linear || op == OpId::ScaledDotProductAttention || op == OpId::LinearCrossEntropy ||
      op == OpId::LinearCrossEntropyGrad || op == OpId::LinearCrossEntropyWithGrad || op == OpId::LinearCrossEntropyStats ||
      op == OpId::LinearCrossEntropyStatsGrad || op == OpId::ScaledDotProductAttentionGrad)
    return true;  // the matmul composites
  switch (op) {
    FSDPC_MATMUL_CASES
    FSDPC_COLLECTIVE_CASES
    FSDPC_BUFFER_CASES
    case OpId::IndexAdd:
      return true;
    FSDPC_ELEMENTWISE_CASES
    FSDPC_REDUCTION_CASES
    FSDPC_SHAPE_CASES
    FSDPC_CREATION_CASES
    FSDPC_FUSION_CASES
    FSDPC_MEMORY_CASES
    FSDPC_COMPOSITE_CASES  // but linear and attention, above: normalisations, activations, losses
    case OpId::Take:
      return false;
  }
  op_outside_table(op);
}

int64_t bytes_of(const Proxy& p) { return numel(p.type.shape) * static_cast<int64_t>(dtype_size(p.type.dtype)); }

// The joint trace's forward side, as remat reads it.
struct Forward {
  const Trace& joint;
  std::vector<bool> fwd;                           // statement is in the forward
  std::unordered_map<std::string, size_t> def;     // forward-defined name -> statement
  std::unordered_map<std::string, const Proxy*> arg;
  std::vector<std::vector<size_t>> users;          // statement -> forward statements reading its outputs
  NameSet returned;                                // the forward's outputs
  NameSet read_by_backward;
  // Values computed from parameters alone (gathers, casts, views of
  // parameters), and the units whose parameters each one reads.
  std::unordered_map<std::string, std::vector<size_t>> param_units;
};

Forward analyse(const Trace& joint, const std::vector<Unit>& units) {
  Forward f{joint, forward_statements(joint), {}, {}, {}, {}, {}, {}};
  std::unordered_map<std::string, size_t> unit_of;
  for (size_t u = 0; u < units.size(); ++u)
    for (const std::string& p : units[u].params) unit_of[p] = u;
  for (const Proxy& a : joint.args) {
    f.arg[a.name] = &a;
    if (auto it = unit_of.find(a.name); it != unit_of.end()) f.param_units[a.name] = {it->second};
  }
  const auto& bsyms = joint.bsyms;
  f.users.resize(bsyms.size());
  for (size_t i = 0; i < bsyms.size(); ++i) {
    const BoundSymbol& b = bsyms[i];
    if (!f.fwd[i]) {
      for (const Operand& in : b.inputs)
        if (!in.is_scalar()) f.read_by_backward.insert(in.name);
      continue;
    }
    bool from_params = true;
    std::vector<size_t> pu;
    for (const Operand& in : b.inputs) {
      if (in.is_scalar()) continue;
      if (auto d = f.def.find(in.name); d != f.def.end()) f.users[d->second].push_back(i);
      auto it = f.param_units.find(in.name);
      if (it == f.param_units.end()) {
        from_params = false;
        continue;
      }
      pu.insert(pu.end(), it->second.begin(), it->second.end());
    }
    for (const Proxy& o : b.outputs) {
      f.def[o.name] = i;
      if (from_params) f.param_units[o.name] = pu;
    }
  }
  std::vector<std::string> names;
  for (size_t i = 0; i + 1 < joint.returns.items.size(); ++i) joint.returns.items[i].collect_names(names);
  f.returned.insert(names.begin(), names.end());
  names.clear();
  joint.returns.items.back().collect_names(names);
  f.read_by_backward.insert(names.begin(), names.end());
  return f;
}

bool param_derived(const Forward& f, const std::string& n) { return f.param_units.count(n) > 0; }

// The unit each forward statement belongs to (SIZE_MAX: a parameter-derived
// statement, which belongs to none): the unit whose parameters it reads,
// else the unit of the statement before it.
std::vector<size_t> statement_units(const Forward& f) {
  const auto& bsyms = f.joint.bsyms;
  std::vector<size_t> seg(bsyms.size(), SIZE_MAX);
  size_t cur = 0;  // the root unit until a block's parameter is read
  for (size_t i = 0; i < bsyms.size(); ++i) {
    if (!f.fwd[i] || (!bsyms[i].outputs.empty() && param_derived(f, bsyms[i].outputs[0].name))) continue;
    std::vector<size_t> read;
    for (const Operand& in : bsyms[i].inputs)
      if (!in.is_scalar())
        if (auto it = f.param_units.find(in.name); it != f.param_units.end())
          read.insert(read.end(), it->second.begin(), it->second.end());
    if (!read.empty() && std::find(read.begin(), read.end(), cur) == read.end())
      cur = *std::max_element(read.begin(), read.end());
    seg[i] = cur;
  }
  return seg;
}

// The first `count` units (in forward order) that own statements, root excluded.
std::vector<bool> blocked_units(const std::vector<size_t>& seg, size_t n_units, size_t count) {
  std::vector<bool> blocked(n_units, false);
  size_t taken = 0;
  for (size_t u : seg) {
    if (u == SIZE_MAX || u == 0 || blocked[u] || taken >= count) continue;
    blocked[u] = true;
    ++taken;
  }
  return blocked;
}

// Block mode: values of checkpointed units that no statement outside the unit
// reads and the forward does not return.
NameSet block_recomputable(const Forward& f, const std::vector<size_t>& seg, const std::vector<bool>& blocked) {
  NameSet out;
  const auto& bsyms = f.joint.bsyms;
  for (size_t i = 0; i < bsyms.size(); ++i) {
    if (seg[i] == SIZE_MAX || !blocked[seg[i]] || is_communication(bsyms[i].op)) continue;
    bool boundary = false;
    for (size_t u : f.users[i]) boundary = boundary || seg[u] != seg[i];
    for (const Proxy& o : bsyms[i].outputs) {
      if (boundary || f.returned.count(o.name)) continue;
      out.insert(o.name);
    }
  }
  return out;
}

// A bias add: an expensive op's output plus a value computed from
// parameters alone (Hugging Face's Conv1D is matmul, then add of the
// broadcast bias). It belongs to its matmul, as addmm does in PyTorch:
// recomputing it would materialise the bias broadcast to the full output.
bool is_bias_add(const Forward& f, const BoundSymbol& b) {
  if (b.op != OpId::Add) return false;
  // Directly: under autocast the add reads the matmul's output cast to f32,
  // and saving that f32 sum would double the bf16 output's bytes.
  auto expensive_output = [&](const std::string& n) {
    auto d = f.def.find(n);
    return d != f.def.end() && is_expensive(f.joint.bsyms[d->second].op);
  };
  bool from_expensive = false, from_params = false;
  for (const Operand& in : b.inputs) {
    if (in.is_scalar()) return false;
    if (expensive_output(in.name))
      from_expensive = true;
    else if (param_derived(f, in.name))
      from_params = true;
  }
  return from_expensive && from_params;
}

// Casts, views and broadcasts of parameters: split recomputes them from the
// parameter (or, under zero3, its re-gather) already; without re-gathering
// (zero2, no_shard) they are recomputed from the gathered parameter, which is
// saved anyway, rather than saved themselves at the size they are broadcast to.
NameSet parameter_views(const Forward& f) {
  NameSet out;
  const auto& bsyms = f.joint.bsyms;
  for (size_t i = 0; i < bsyms.size(); ++i) {
    if (!f.fwd[i] || is_communication(bsyms[i].op) || is_expensive(bsyms[i].op)) continue;
    for (const Proxy& o : bsyms[i].outputs)
      if (param_derived(f, o.name)) out.insert(o.name);
  }
  return out;
}

// Selective mode: what block mode recomputes, less the outputs of expensive
// ops (with their bias adds).
NameSet selective_recomputable(const Forward& f, const NameSet& in_blocks) {
  NameSet out;
  for (const std::string& n : in_blocks) {
    const BoundSymbol& b = f.joint.bsyms[f.def.at(n)];
    if (!is_expensive(b.op) && !is_bias_add(f, b)) out.insert(n);
  }
  return out;
}

// Dinic's maximum flow; the minimum cut is read off the residual graph.
class FlowGraph {
 public:
  static constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;
  explicit FlowGraph(size_t n) : adj_(n) {}
  void add(size_t from, size_t to, int64_t cap) {
    adj_[from].push_back(edges_.size());
    edges_.push_back({to, cap});
    adj_[to].push_back(edges_.size());
    edges_.push_back({from, 0});
  }
  void max_flow(size_t s, size_t t) {
    while (levels(s, t)) {
      next_.assign(adj_.size(), 0);
      while (push(s, t, kInf) > 0) {
      }
    }
  }
  // Nodes that can still reach `t` in the residual graph: the sink side of
  // the minimum cut closest to the sink.
  std::vector<bool> reaches(size_t t) const {
    std::vector<bool> seen(adj_.size(), false);
    std::vector<size_t> stack{t};
    seen[t] = true;
    while (!stack.empty()) {
      size_t v = stack.back();
      stack.pop_back();
      for (size_t e : adj_[v]) {
        // Residual capacity of the reverse edge u -> v is edges_[e ^ 1].cap.
        size_t u = edges_[e].to;
        if (!seen[u] && edges_[e ^ 1].cap > 0) {
          seen[u] = true;
          stack.push_back(u);
        }
      }
    }
    return seen;
  }

 private:
  struct Edge {
    size_t to;
    int64_t cap;
  };
  bool levels(size_t s, size_t t) {
    level_.assign(adj_.size(), -1);
    std::queue<size_t> q;
    level_[s] = 0;
    q.push(s);
    while (!q.empty()) {
      size_t v = q.front();
      q.pop();
      for (size_t e : adj_[v])
        if (edges_[e].cap > 0 && level_[edges_[e].to] < 0) {
          level_[edges_[e].to] = level_[v] + 1;
          q.push(edges_[e].to);
        }
    }
    return level_[t] >= 0;
  }
  // Iterative-deepening DFS is not needed at these sizes (a few thousand
  // nodes); recursion depth is bounded by the level graph's length.
  int64_t push(size_t v, size_t t, int64_t limit) {
    if (v == t) return limit;
    for (size_t& k = next_[v]; k < adj_[v].size(); ++k) {
      Edge& e = edges_[adj_[v][k]];
      if (e.cap <= 0 || level_[e.to] != level_[v] + 1) continue;
      int64_t got = push(e.to, t, std::min(limit, e.cap));
      if (got > 0) {
        e.cap -= got;
        edges_[adj_[v][k] ^ 1].cap += got;
        return got;
      }
    }
    return 0;
  }
  std::vector<std::vector<size_t>> adj_;
  std::vector<Edge> edges_;
  std::vector<int> level_;
  std::vector<size_t> next_;
};

// auto: the minimum cut. Each value v is two nodes, v_in -> v_out with its
// bytes as capacity (saving it); v_in on the source side means v is computed
// in the forward, v_out on the sink side that the backward has it. Data flow
// u_out -> v_in is uncuttable, so a recomputed value's inputs are available.
NameSet auto_recomputable(const Forward& f, const NameSet& forced, const NameSet& must_save, bool regather) {
  std::unordered_map<std::string, size_t> id;
  std::vector<std::string> names;
  auto node = [&](const std::string& n) {
    auto [it, added] = id.emplace(n, names.size());
    if (added) names.push_back(n);
    return it->second;
  };
  for (const Proxy& a : f.joint.args) node(a.name);
  const auto& bsyms = f.joint.bsyms;
  for (size_t i = 0; i < bsyms.size(); ++i)
    if (f.fwd[i])
      for (const Proxy& o : bsyms[i].outputs) node(o.name);
  const size_t n = names.size(), src = 2 * n, sink = 2 * n + 1;
  FlowGraph g(2 * n + 2);
  auto in = [](size_t v) { return 2 * v; };
  auto out = [](size_t v) { return 2 * v + 1; };
  for (const Proxy& a : f.joint.args) {
    size_t v = id.at(a.name);
    g.add(src, in(v), FlowGraph::kInf);
    // A parameter (a shard) is live for the whole step anyway.
    g.add(in(v), out(v), a.is_param() ? 0 : bytes_of(a));
  }
  for (size_t i = 0; i < bsyms.size(); ++i) {
    if (!f.fwd[i]) continue;
    const BoundSymbol& b = bsyms[i];
    const bool from_params = !b.outputs.empty() && param_derived(f, b.outputs[0].name);
    // Gathers of parameters are re-done in the backward only under zero3;
    // any other collective, and an expensive op, is computed in the forward.
    bool banned = is_expensive(b.op) && !(from_params && regather && is_regather(b.op));
    for (const Proxy& o : b.outputs) {
      size_t v = id.at(o.name);
      const bool ban = (banned && !forced.count(o.name)) || must_save.count(o.name);
      if (ban) g.add(src, in(v), FlowGraph::kInf);
      // A checkpointed unit's internal value is never saved: its unit's
      // boundary (or a parameter) pays for it.
      g.add(in(v), out(v), forced.count(o.name) ? FlowGraph::kInf : bytes_of(o));
      for (const Operand& x : b.inputs)
        if (!x.is_scalar()) g.add(out(id.at(x.name)), in(v), FlowGraph::kInf);
    }
  }
  // Arguments are there for the backward whatever the cut (saved, or its own inputs).
  for (const std::string& r : f.read_by_backward)
    if (f.def.count(r)) g.add(out(id.at(r)), sink, FlowGraph::kInf);
  g.max_flow(src, sink);
  const std::vector<bool> sink_side = g.reaches(sink);
  NameSet recompute;
  for (size_t v = 0; v < n; ++v)
    if (sink_side[in(v)] && f.def.count(names[v])) recompute.insert(names[v]);
  return recompute;
}

}  // namespace

std::string remat_name(const RematOptions& o) {
  switch (o.mode) {
    case RematMode::none: return "none";
    case RematMode::block: return "block";
    case RematMode::selective: return "selective";
    case RematMode::auto_cut: return o.budget_bytes > 0 ? "auto:" + std::to_string(o.budget_bytes) : "auto";
  }
  return "?";
}

size_t checkpointable_units(const Trace& joint, const std::vector<Unit>& units) {
  const Forward f = analyse(joint, units);
  const std::vector<size_t> seg = statement_units(f);
  const std::vector<bool> all = blocked_units(seg, units.size(), SIZE_MAX);
  return static_cast<size_t>(std::count(all.begin(), all.end(), true));
}

NameSet remat_recomputable(const Trace& joint, const RematPlan& plan) {
  if (plan.mode == RematMode::none) return {};
  const Forward f = analyse(joint, plan.units);
  const std::vector<size_t> seg = statement_units(f);
  const std::vector<bool> blocked = blocked_units(seg, plan.units.size(), plan.blocked_units);
  NameSet in_blocks = block_recomputable(f, seg, blocked);
  if (plan.mode == RematMode::block || plan.mode == RematMode::selective) {
    NameSet out = plan.mode == RematMode::block ? std::move(in_blocks) : selective_recomputable(f, in_blocks);
    const NameSet views = parameter_views(f);
    out.insert(views.begin(), views.end());
    return out;
  }
  // auto: checkpointed units (a budget's choice) recompute from their
  // boundaries, which are therefore saved; the cut decides everything else.
  NameSet boundaries;
  for (size_t i = 0; i < joint.bsyms.size(); ++i)
    if (seg[i] != SIZE_MAX && blocked[seg[i]])
      for (const Proxy& o : joint.bsyms[i].outputs)
        if (!in_blocks.count(o.name) && !is_communication(joint.bsyms[i].op)) boundaries.insert(o.name);
  NameSet cut = auto_recomputable(f, in_blocks, boundaries, plan.regather_params);
  cut.insert(in_blocks.begin(), in_blocks.end());
  return cut;
}

}  // namespace fsdpc
