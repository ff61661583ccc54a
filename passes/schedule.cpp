// schedule: overlaps communication with compute by moving collectives, as
// PyTorch FSDP's forward/backward prefetch and rate limiter do; deliberately
// not Thunder's hoisting of every all_gather to the top, which holds every
// gathered parameter at once.
//
// Pre:  a forward or backward trace (after split or bucketing).
// Post: the same statements, reordered. Compute keeps its order. Parameter
//       all_gathers, grouped into units, in order of first use: unit i's
//       [pack +] all_gather is issued right before the first consumer of unit
//       i - prefetch, or later while max_inflight all_gathers are outstanding
//       (until the oldest is waited); its wait [+ reshape/slice/unpack] sits
//       right before its first consumer. Each reduce_scatter or gradient
//       all_reduce, with the div/pad/reshape/cat/pack feeding it, is issued as
//       soon as its inputs exist (hybrid's replica all_reduce once its
//       reduce_scatter's wait is placed); its wait [+ unpack] comes
//       right before its first consumer, or at the end — or, when
//       max_inflight reductions are outstanding and another is issued, the
//       oldest is waited first (its full-size gradient buffer lives until
//       then). Replica all_reduces of shards do not count toward
//       max_inflight: their buffers are shard-sized.
//
//   ft1 = all_gather(t_a); t2 = wait(ft1); t3 = linear(x, t2)
//   ft4 = all_gather(t_b); t5 = wait(ft4); t6 = linear(t3, t5)
// becomes, with prefetch 1:
//   ft1 = all_gather(t_a); ft4 = all_gather(t_b); t2 = wait(ft1); t3 = linear(x, t2)
//   t5 = wait(ft4); t6 = linear(t3, t5)
#include "passes/schedule.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <optional>
#include <queue>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"

namespace fsdpc {

namespace {

constexpr size_t kEnd = std::numeric_limits<size_t>::max();  // "used by no compute statement"

enum class PartKind { gather_issue, gather_wait, reduce_issue, reduce_wait };

// Statements that move together.
struct Part {
  PartKind kind;
  std::vector<size_t> stmts;  // in trace order
  size_t item = 0;            // gathers: index into Schedule::gathers_; reduce issues: 1 for a second stage
  bool done = false;
};

struct Gather {
  size_t issue = 0, wait = 0;  // parts
  std::string unit;            // unit name, or the all_gather's output for a parameter in no unit
  size_t first_use = kEnd;     // first compute statement reading what the wait part defines
  size_t release = 0;          // the compute statement before which it may be issued
  bool issued = false, waited = false;
};

bool is_feed_op(OpId op) {
  return op == OpId::Div || op == OpId::Pad || op == OpId::Reshape || op == OpId::Cat || op == OpId::Pack;
}
bool is_gather_tail_op(OpId op) {
  return op == OpId::Reshape || op == OpId::Slice || op == OpId::Unpack || op == OpId::Dequantize;
}
// A convert after a reduction's wait is mixed precision's cast of the
// reduced gradient back to f32: it moves with the wait. Hybrid's replica
// all_reduce of a reduce_scatter's result is not tail: it is a reduction of
// its own, issued once that wait is placed and waited as late as any other.
bool is_reduce_tail_op(OpId op) { return op == OpId::Wait || op == OpId::Unpack || op == OpId::ConvertElementType; }

class Schedule {
 public:
  Schedule(const Trace& t, const ScheduleOptions& o);
  Trace run();

 private:
  // Analysis.
  void find_gathers(const std::vector<Unit>& units);
  void find_reduces();
  std::vector<size_t> tail(size_t wait, bool (*op_ok)(OpId)) const;
  std::vector<size_t> feed(size_t collective) const;
  bool unclaimed(const std::vector<size_t>& stmts) const;
  size_t claim(PartKind kind, std::vector<size_t> stmts, size_t item);
  void order_gathers();
  // Emission.
  void emit_stmt(size_t i);
  void need(const std::string& name);
  void emit_part(size_t p);
  void issue_next();
  void ensure_issued(size_t g);
  void wait_gather(size_t g);
  void try_issue();
  void flush_ready_reduces();

  const Trace& in_;
  const ScheduleOptions& o_;
  Trace out_;
  std::unordered_map<std::string, size_t> def_;
  std::unordered_map<std::string, std::vector<size_t>> users_;
  std::unordered_set<std::string> args_, returned_;
  std::unordered_set<std::string> defined_;
  std::vector<bool> emitted_;
  std::vector<long> part_of_;  // statement -> part, -1: compute
  std::vector<Part> parts_;
  std::vector<Gather> gathers_;
  std::vector<size_t> issue_order_;  // gathers, in the order they are issued
  size_t next_issue_ = 0, released_ = 0;
  std::deque<size_t> outstanding_;  // issued, not yet waited, oldest first
  // Reduce issue parts: how many of their inputs are still undefined.
  std::unordered_map<std::string, std::vector<size_t>> awaiting_;
  std::vector<size_t> missing_;  // per part
  std::deque<size_t> ready_;
  std::deque<size_t> reduces_in_flight_;  // issue parts whose wait may still be pending
};

Schedule::Schedule(const Trace& t, const ScheduleOptions& o)
    : in_(t), o_(o), emitted_(t.bsyms.size(), false), part_of_(t.bsyms.size(), -1) {
  // Sized once: advise schedules a few hundred traces of thousands of names.
  def_.reserve(t.bsyms.size());
  users_.reserve(t.bsyms.size() + t.args.size());
  defined_.reserve(t.bsyms.size() + t.args.size());
  for (size_t i = 0; i < t.bsyms.size(); ++i) {
    for (const Proxy& out : t.bsyms[i].outputs) def_[out.name] = i;
    for (const Operand& in : t.bsyms[i].inputs)
      if (!in.is_scalar()) users_[in.name].push_back(i);
  }
  for (const Proxy& a : t.args) args_.insert(a.name);
  defined_.insert(args_.begin(), args_.end());
  std::vector<std::string> names;
  t.returns.collect_names(names);
  returned_.insert(names.begin(), names.end());
  find_gathers(o.units);
  find_reduces();
  order_gathers();
}

// A statement moves with one part at most.
bool Schedule::unclaimed(const std::vector<size_t>& stmts) const {
  for (size_t s : stmts)
    if (part_of_[s] >= 0) return false;
  return true;
}

size_t Schedule::claim(PartKind kind, std::vector<size_t> stmts, size_t item) {
  std::sort(stmts.begin(), stmts.end());
  const size_t part = parts_.size();
  for (size_t s : stmts) part_of_[s] = static_cast<long>(part);
  parts_.push_back({kind, std::move(stmts), item, false});
  return part;
}

// The wait and what reads only its results through `op_ok` ops: the
// statements that move with the wait.
std::vector<size_t> Schedule::tail(size_t wait, bool (*op_ok)(OpId)) const {
  std::vector<size_t> stmts{wait};
  std::unordered_set<std::string> values{in_.bsyms[wait].output().name};
  std::vector<std::string> todo(values.begin(), values.end());
  std::unordered_set<size_t> seen{wait};
  while (!todo.empty()) {
    auto it = users_.find(todo.back());
    todo.pop_back();
    if (it == users_.end()) continue;
    for (size_t u : it->second) {
      const BoundSymbol& b = in_.bsyms[u];
      bool inside = op_ok(b.op);
      for (const Operand& x : b.inputs) inside = inside && (x.is_scalar() || values.count(x.name));
      if (!inside || !seen.insert(u).second) continue;
      stmts.push_back(u);
      for (const Proxy& out : b.outputs) {
        values.insert(out.name);
        todo.push_back(out.name);
      }
    }
  }
  return stmts;
}

// The div/pad/reshape/cat/pack statements whose results only feed
// `collective` (directly or through each other).
std::vector<size_t> Schedule::feed(size_t collective) const {
  std::unordered_set<size_t> group{collective};
  std::priority_queue<size_t> todo;  // latest first: a statement's readers are decided before it
  auto push_inputs = [&](size_t s) {
    for (const Operand& x : in_.bsyms[s].inputs)
      if (auto d = def_.find(x.name); !x.is_scalar() && d != def_.end()) todo.push(d->second);
  };
  push_inputs(collective);
  while (!todo.empty()) {
    const size_t s = todo.top();
    todo.pop();
    if (group.count(s) || !is_feed_op(in_.bsyms[s].op)) continue;
    bool only_feeds = true;
    for (const Proxy& out : in_.bsyms[s].outputs) {
      only_feeds = only_feeds && !returned_.count(out.name);
      if (auto u = users_.find(out.name); u != users_.end())
        for (size_t user : u->second) only_feeds = only_feeds && group.count(user);
    }
    if (!only_feeds) continue;
    group.insert(s);
    push_inputs(s);
  }
  return {group.begin(), group.end()};
}

// The sole wait reading a collective's future, if that is how it is used.
std::optional<size_t> sole_wait(const Trace& t, const std::unordered_map<std::string, std::vector<size_t>>& users,
                                const std::string& future) {
  auto it = users.find(future);
  if (it == users.end() || it->second.size() != 1 || t.bsyms[it->second[0]].op != OpId::Wait) return std::nullopt;
  return it->second[0];
}

// all_gathers of parameter shards (arguments), or of a pack of shards, each
// perhaps cast to a lower precision (autocast) or quantized (int8 gathers).
void Schedule::find_gathers(const std::vector<Unit>& units) {
  std::unordered_map<std::string, std::string> unit_of;
  for (const Unit& u : units)
    for (const std::string& p : u.params) unit_of.emplace(p, u.name);
  for (size_t i = 0; i < in_.bsyms.size(); ++i) {
    const BoundSymbol& b = in_.bsyms[i];
    if (b.op != OpId::AllGather) continue;
    std::vector<size_t> issue{i};
    std::string shard = b.inputs[0].name;
    // Back through what only this gather reads: casts (mixed precision),
    // quantize (--gather-dtype int8), to a shard or a pack of shards.
    bool from_shards = true;
    while (from_shards && !args_.count(shard)) {
      const auto d = def_.find(shard);
      const bool only_gathered = d != def_.end() && users_.at(shard).size() == 1 && !returned_.count(shard);
      const BoundSymbol* src = only_gathered ? &in_.bsyms[d->second] : nullptr;
      if (src && (src->op == OpId::ConvertElementType || src->op == OpId::Quantize)) {
        issue.push_back(d->second);  // moves with its gather
        shard = src->inputs[0].name;
        continue;
      }
      // A pack of shards, each perhaps quantized first (int8 gathers of a
      // unit: bucketing codes each parameter in blocks of its own).
      bool packs_args = src && src->op == OpId::Pack;
      std::vector<size_t> coded;
      for (size_t k = 0; packs_args && k < src->inputs.size(); ++k) {
        const std::string& x = src->inputs[k].name;
        if (args_.count(x)) continue;
        const auto q = def_.find(x);
        packs_args = q != def_.end() && in_.bsyms[q->second].op == OpId::Quantize && users_.at(x).size() == 1 &&
                     !returned_.count(x) && args_.count(in_.bsyms[q->second].inputs[0].name);
        if (packs_args) coded.push_back(q->second);
      }
      if (packs_args) {
        issue.push_back(d->second);
        issue.insert(issue.end(), coded.begin(), coded.end());
        const BoundSymbol& first = in_.bsyms[d->second];
        shard = args_.count(first.inputs[0].name) ? first.inputs[0].name
                                                   : in_.bsyms[def_.at(first.inputs[0].name)].inputs[0].name;
      } else {
        from_shards = false;
      }
    }
    if (!from_shards) continue;
    std::optional<size_t> w = sole_wait(in_, users_, b.output().name);
    if (!w) continue;
    std::vector<size_t> wait = tail(*w, is_gather_tail_op);
    if (!unclaimed(issue) || !unclaimed(wait)) continue;
    Gather g;
    g.unit = unit_of.count(shard) ? unit_of.at(shard) : "#" + b.output().name;
    g.issue = claim(PartKind::gather_issue, std::move(issue), gathers_.size());
    g.wait = claim(PartKind::gather_wait, std::move(wait), gathers_.size());
    gathers_.push_back(g);
  }
}

// reduce_scatters and gradient all_reduces, hybrid's replica all_reduce of a
// reduce_scatter's waited result included (ready once that wait is placed).
void Schedule::find_reduces() {
  std::vector<size_t> issues;
  for (size_t i = 0; i < in_.bsyms.size(); ++i) {
    const BoundSymbol& b = in_.bsyms[i];
    if (b.op != OpId::ReduceScatter && b.op != OpId::AllReduce) continue;
    std::optional<size_t> w = sole_wait(in_, users_, b.output().name);
    if (!w) continue;
    std::vector<size_t> issue = feed(i), wait = tail(*w, is_reduce_tail_op);
    if (!unclaimed(issue) || !unclaimed(wait)) continue;
    // A reduction of a waited reduction's result (hybrid's replica
    // all_reduce of a reduce_scatter's shard) holds only shard-sized
    // buffers, so it does not count against max_inflight.
    const auto d = def_.find(b.inputs[0].name);
    const bool second = d != def_.end() && in_.bsyms[d->second].op == OpId::Wait;
    issues.push_back(claim(PartKind::reduce_issue, std::move(issue), second ? 1 : 0));
    claim(PartKind::reduce_wait, std::move(wait), 0);
  }
  // An issue part is ready once every value it reads from outside exists.
  missing_.assign(parts_.size(), 0);
  for (size_t p : issues) {
    std::unordered_set<std::string> inside, counted;
    for (size_t s : parts_[p].stmts)
      for (const Proxy& out : in_.bsyms[s].outputs) inside.insert(out.name);
    for (size_t s : parts_[p].stmts)
      for (const Operand& x : in_.bsyms[s].inputs) {
        if (x.is_scalar() || inside.count(x.name) || args_.count(x.name) || !counted.insert(x.name).second) continue;
        awaiting_[x.name].push_back(p);
        ++missing_[p];
      }
    if (missing_[p] == 0) ready_.push_back(p);
  }
}

// Units in order of first use; gathers issued unit by unit, each released
// at the first use of the unit `prefetch` places before its own.
void Schedule::order_gathers() {
  std::unordered_map<std::string, std::pair<size_t, size_t>> unit_first;  // (first use, first issue)
  for (Gather& g : gathers_) {
    for (size_t s : parts_[g.wait].stmts)
      for (const Proxy& out : in_.bsyms[s].outputs)
        if (auto u = users_.find(out.name); u != users_.end())
          for (size_t user : u->second)
            if (part_of_[user] < 0) g.first_use = std::min(g.first_use, user);
    auto [it, added] = unit_first.emplace(g.unit, std::make_pair(g.first_use, parts_[g.issue].stmts.back()));
    if (!added) it->second = std::min(it->second, std::make_pair(g.first_use, parts_[g.issue].stmts.back()));
  }
  std::vector<std::pair<std::pair<size_t, size_t>, std::string>> units;
  for (const auto& [name, first] : unit_first) units.push_back({first, name});
  std::sort(units.begin(), units.end());
  std::unordered_map<std::string, size_t> rank;
  for (size_t r = 0; r < units.size(); ++r) rank[units[r].second] = r;
  const size_t ahead = static_cast<size_t>(o_.prefetch);
  for (size_t g = 0; g < gathers_.size(); ++g) {
    const size_t r = rank.at(gathers_[g].unit);
    gathers_[g].release = r < ahead ? 0 : units[r - ahead].first.first;
    issue_order_.push_back(g);
  }
  std::sort(issue_order_.begin(), issue_order_.end(), [&](size_t a, size_t b) {
    auto key = [&](size_t g) {
      return std::make_tuple(rank.at(gathers_[g].unit), gathers_[g].first_use, parts_[gathers_[g].issue].stmts.back());
    };
    return key(a) < key(b);
  });
}

void Schedule::emit_stmt(size_t i) {
  if (emitted_[i]) return;
  emitted_[i] = true;
  for (const Operand& x : in_.bsyms[i].inputs)
    if (!x.is_scalar()) need(x.name);
  out_.bsyms.push_back(in_.bsyms[i]);
  for (const Proxy& out : in_.bsyms[i].outputs) {
    defined_.insert(out.name);
    if (auto it = awaiting_.find(out.name); it != awaiting_.end())
      for (size_t p : it->second)
        if (--missing_[p] == 0) ready_.push_back(p);
  }
}

// Makes `name` defined: a value read before its part was placed brings the
// part in now (a gather waits, issuing it first if need be).
void Schedule::need(const std::string& name) {
  if (defined_.count(name)) return;
  const size_t i = def_.at(name);
  const long p = part_of_[i];
  if (p < 0) return emit_stmt(i);
  const Part& part = parts_[p];
  if (part.kind == PartKind::gather_issue) return ensure_issued(part.item);
  if (part.kind == PartKind::gather_wait) return wait_gather(part.item);
  emit_part(static_cast<size_t>(p));
}

void Schedule::emit_part(size_t p) {
  if (parts_[p].done) return;
  parts_[p].done = true;
  for (size_t s : parts_[p].stmts) emit_stmt(s);
}

void Schedule::issue_next() {
  const size_t g = issue_order_.at(next_issue_++);
  emit_part(gathers_[g].issue);
  gathers_[g].issued = true;
  outstanding_.push_back(g);
}

// Issues gathers in order up to `g`, waiting the oldest outstanding one
// whenever max_inflight are in flight.
void Schedule::ensure_issued(size_t g) {
  while (!gathers_[g].issued) {
    if (outstanding_.size() < static_cast<size_t>(o_.max_inflight))
      issue_next();
    else
      wait_gather(outstanding_.front());
  }
}

void Schedule::wait_gather(size_t g) {
  if (gathers_[g].waited) return;
  ensure_issued(g);
  gathers_[g].waited = true;
  outstanding_.erase(std::find(outstanding_.begin(), outstanding_.end(), g));
  emit_part(gathers_[g].wait);
  try_issue();
}

// Issues released gathers while there is room.
void Schedule::try_issue() {
  while (next_issue_ < released_ && outstanding_.size() < static_cast<size_t>(o_.max_inflight)) issue_next();
}

// Issues every reduction whose inputs exist. At most max_inflight stay
// outstanding: a full gradient buffer lives until its reduction's wait, so
// waiting every one at the end would hold the whole unsharded gradient and
// undo ZeRO's saving; the oldest is waited first when the limit is reached.
void Schedule::flush_ready_reduces() {
  while (!ready_.empty()) {
    const size_t p = ready_.front();
    ready_.pop_front();
    if (parts_[p].item == 1) {  // a second stage: no limit, waited where needed or at the end
      emit_part(p);
      continue;
    }
    while (reduces_in_flight_.size() >= static_cast<size_t>(o_.max_inflight)) {
      emit_part(reduces_in_flight_.front() + 1);  // its wait part, claimed right after it
      reduces_in_flight_.pop_front();
    }
    emit_part(p);
    reduces_in_flight_.push_back(p);
  }
}

Trace Schedule::run() {
  out_ = without_statements(in_, "schedule");
  std::unordered_map<size_t, std::vector<size_t>> due;  // compute statement -> gathers first used there
  for (size_t g : issue_order_) due[gathers_[g].first_use].push_back(g);
  auto release = [&](size_t step) {
    while (released_ < issue_order_.size() && gathers_[issue_order_[released_]].release <= step) ++released_;
    try_issue();
  };
  release(0);
  flush_ready_reduces();
  for (size_t i = 0; i < in_.bsyms.size(); ++i) {
    if (part_of_[i] >= 0 || emitted_[i]) continue;
    release(i);
    if (auto it = due.find(i); it != due.end())
      for (size_t g : it->second) wait_gather(g);
    emit_stmt(i);
    flush_ready_reduces();
  }
  // What no compute statement reads: gathers never used, gradient waits.
  release(kEnd);
  for (size_t g : issue_order_) wait_gather(g);
  // First-stage reductions still outstanding are waited oldest first, each
  // second stage issued as soon as its input is, before any of them waits.
  for (size_t p = 1; p < parts_.size(); ++p)
    if (parts_[p].kind == PartKind::reduce_wait && parts_[p - 1].kind == PartKind::reduce_issue &&
        parts_[p - 1].item == 0) {
      emit_part(p);
      flush_ready_reduces();
    }
  for (size_t p = 0; p < parts_.size(); ++p) emit_part(p);
  return out_;
}

}  // namespace

Trace schedule(const Trace& trace, const ScheduleOptions& options) {
  if (options.prefetch < 0) fail("schedule: prefetch must be >= 0, got ", options.prefetch);
  if (options.max_inflight < 1) fail("schedule: max_inflight must be >= 1, got ", options.max_inflight);
  return Schedule(trace, options).run();
}

void issue_before_waiting(Trace& t) {
  std::vector<BoundSymbol> pending = std::move(t.bsyms), ordered;
  t.bsyms.clear();
  std::unordered_set<std::string> known;
  for (const Proxy& a : t.args) known.insert(a.name);
  auto ready = [&](const BoundSymbol& b) {
    for (const Operand& in : b.inputs)
      if (!in.is_scalar() && !known.count(in.name)) return false;
    return true;
  };
  auto take = [&](size_t i) {
    for (const Proxy& p : pending[i].outputs) known.insert(p.name);
    ordered.push_back(std::move(pending[i]));
    pending.erase(pending.begin() + static_cast<long>(i));
  };
  while (!pending.empty()) {
    bool progressed = false;
    for (size_t i = 0; i < pending.size();)
      if (pending[i].op != OpId::Wait && ready(pending[i])) {
        take(i);
        progressed = true;
      } else {
        ++i;
      }
    if (progressed) continue;
    size_t i = 0;
    while (i < pending.size() && !ready(pending[i])) ++i;
    FSDPC_CHECK(i < pending.size()) << t.name << ": a statement reads a value nothing defines";
    take(i);
  }
  t.bsyms = std::move(ordered);
}

}  // namespace fsdpc
