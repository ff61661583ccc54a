// trace_stats(): one walk over the top-level statements that adds up the
// collectives' traffic and follows the live bytes from argument to `del`.
#include "passes/stats.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/error.h"

namespace fsdpc {

namespace {

int64_t bytes_of(const TensorType& t) { return numel(t.shape) * dtype_size(t.dtype); }

// The bytes one rank sends in one group collective under the ring
// convention, for a group of n ranks (the op's `size`); nullopt for ops that
// are not group collectives, which add_collective refuses when they issue.
std::optional<double> ring_bytes(const BoundSymbol& b, const TensorType& input) {
  const double n = static_cast<double>(b.attrs.get_int("size"));
  const double share = (n - 1) / n;
  switch (b.op) {
    case OpId::AllGather:  // its output O: O * (n-1)/n
      return static_cast<double>(bytes_of(b.output().type)) * share;
    case OpId::ReduceScatter:  // its input I: I * (n-1)/n
      return static_cast<double>(bytes_of(input)) * share;
    case OpId::AllReduce:  // a reduce_scatter then an all_gather: 2 * S * (n-1)/n
      return 2 * static_cast<double>(bytes_of(input)) * share;
    case OpId::Broadcast:  // pipelined chunks: S * (n-1)/n
      return static_cast<double>(bytes_of(input)) * share;
    FSDPC_CASES_EXCEPT_COLLECTIVE
    case OpId::Synchronize: case OpId::Wait: case OpId::Send: case OpId::Recv:
      return std::nullopt;
  }
  op_outside_table(b.op);
}

void add_collective(TraceStats& s, const BoundSymbol& b,
                    const std::unordered_map<std::string, TensorType>& types) {
  if (b.op == OpId::Synchronize) ++s.synchronize_count;
  if (!op_info(b.op).has(OpTrait::issue)) return;
  CollectiveStats& entry = s.by_op.at(b.op);
  if (op_info(b.op).has(OpTrait::p2p)) {
    ++entry.count;
    entry.bytes += static_cast<double>(bytes_of(b.output().type));
    return;
  }
  auto in = types.find(b.inputs.at(0).name);
  if (in == types.end()) fail("stats: ", op_name(b.op), " uses ", b.inputs[0].name,
                              ", which is not defined");
  const std::optional<double> bytes = ring_bytes(b, in->second);
  FSDPC_CHECK(bytes) << "collective " << op_name(b.op) << " has no traffic formula";
  ++entry.count;
  entry.bytes += *bytes;
  ++s.collective_count;
  s.collective_bytes += *bytes;
}

// The group collectives, or the p2p ones, in op-table order.
std::vector<std::pair<OpId, CollectiveStats>> entries(const TraceStats& s, bool p2p) {
  std::vector<std::pair<OpId, CollectiveStats>> out;
  for (const auto& [op, c] : s.by_op)
    if (op_info(op).has(OpTrait::p2p) == p2p) out.emplace_back(op, c);
  return out;
}

std::string with_unit(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = bytes;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  else
    std::snprintf(buf, sizeof buf, "%.0f B (%.2f %s)", bytes, v, units[u]);
  return buf;
}

}  // namespace

const CollectiveStats& TraceStats::of(OpId op) const {
  auto it = by_op.find(op);
  FSDPC_CHECK(it != by_op.end()) << op_name(op) << " is not a collective that stats count";
  return it->second;
}

TraceStats trace_stats(const Trace& trace) {
  TraceStats s;
  for (int i = 0; i < kNumOps; ++i) {
    const OpId op = static_cast<OpId>(i);
    if (op_info(op).has(OpTrait::issue)) s.by_op[op] = {};
  }
  std::unordered_map<std::string, TensorType> types;
  for (const Proxy& a : trace.args) {
    types[a.name] = a.type;
    s.arg_bytes += bytes_of(a.type);
    if (a.is_param()) s.param_bytes += bytes_of(a.type);
  }
  int64_t live = s.arg_bytes;
  s.peak_live_bytes = live;
  for (size_t i = 0; i < trace.bsyms.size(); ++i) {
    const BoundSymbol& b = trace.bsyms[i];
    add_collective(s, b, types);
    if (b.op == OpId::Del) {
      s.has_dels = true;
      for (const Operand& in : b.inputs) {
        auto it = types.find(in.name);
        if (it == types.end()) fail("stats: del of ", in.name, ", which is not defined");
        live -= bytes_of(it->second);
        types.erase(it);
      }
      continue;
    }
    for (const Proxy& o : b.outputs) {
      types[o.name] = o.type;
      if (b.op != OpId::Wait) live += bytes_of(o.type);  // the future's buffer
    }
    if (live > s.peak_live_bytes) {
      s.peak_live_bytes = live;
      s.peak_statement = static_cast<int64_t>(i) + 1;
    }
  }
  s.end_live_bytes = live;
  return s;
}

std::string stats_json(const TraceStats& s) {
  using Json = nlohmann::ordered_json;
  auto entry = [](const CollectiveStats& c) {
    return Json{{"count", c.count}, {"bytes", c.bytes}};
  };
  Json j;
  j["convention"] = "ring algorithm, bytes sent per rank";
  for (const auto& [op, c] : entries(s, false)) j["collectives"][op_name(op)] = entry(c);
  for (const auto& [op, c] : entries(s, true)) j["point_to_point"][op_name(op)] = entry(c);
  j["collective_count"] = s.collective_count;
  j["collective_bytes"] = s.collective_bytes;
  j["synchronize_count"] = s.synchronize_count;
  j["memory"] = Json{{"arg_bytes", s.arg_bytes},
                     {"param_bytes", s.param_bytes},
                     {"peak_live_bytes", s.peak_live_bytes},
                     {"peak_statement", s.peak_statement},
                     {"end_live_bytes", s.end_live_bytes},
                     {"has_dels", s.has_dels}};
  if (!s.has_dels)
    j["memory"]["note"] = "no del in the trace: the peak is the no-free upper bound";
  return j.dump(2);
}

std::string stats_text(const TraceStats& s) {
  std::string out = "collectives (ring algorithm, bytes sent per rank):\n";
  char line[160];
  auto row = [&](std::string_view name, int64_t count, double bytes) {
    std::snprintf(line, sizeof line, "  %-15.*s %5lld  %s\n", static_cast<int>(name.size()),
                  name.data(), static_cast<long long>(count), with_unit(bytes).c_str());
    out += line;
  };
  for (const auto& [op, c] : entries(s, false)) row(op_name(op), c.count, c.bytes);
  row("total", s.collective_count, s.collective_bytes);
  const auto p2p = entries(s, true);
  if (std::any_of(p2p.begin(), p2p.end(), [](const auto& e) { return e.second.count > 0; })) {
    out += "point to point (pipeline stages; bytes sent, and received):\n";
    for (const auto& [op, c] : p2p) row(op_name(op), c.count, c.bytes);
  }
  if (s.synchronize_count)
    out += "  (" + std::to_string(s.synchronize_count) +
           " synchronize not yet lowered; run grad to see their collectives)\n";
  out += "memory (bytes per rank):\n";
  out += "  arguments       " + with_unit(static_cast<double>(s.arg_bytes)) + "\n";
  out += "    parameters    " + with_unit(static_cast<double>(s.param_bytes)) + "\n";
  out += "  peak live       " + with_unit(static_cast<double>(s.peak_live_bytes));
  out += s.peak_statement == 0 ? " at entry\n"
                               : " after statement " + std::to_string(s.peak_statement) + "\n";
  out += "  live at return  " + with_unit(static_cast<double>(s.end_live_bytes)) + "\n";
  if (!s.has_dels)
    out += "  no del in this trace: nothing is freed, so the peak is the no-free upper bound "
           "(run the del pass)\n";
  return out;
}

}  // namespace fsdpc
