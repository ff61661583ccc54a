// trace_stats(): one walk over the top-level statements that adds up the
// collectives' traffic and follows the live bytes from argument to `del`.
#include "passes/stats.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "ir/error.h"

namespace fsdpc {

namespace {

int64_t bytes_of(const TensorType& t) { return numel(t.shape) * dtype_size(t.dtype); }

// The ring-algorithm traffic of one collective (stats.h), with the stats
// entry it belongs to; null for ops that are not one of the four.
CollectiveStats* account(TraceStats& s, const BoundSymbol& b, const TensorType& input,
                         double& bytes) {
  const double n = static_cast<double>(b.attrs.get_int("size"));
  const double share = (n - 1) / n;
  switch (b.op) {
    case OpId::AllGather:
      bytes = static_cast<double>(bytes_of(b.output().type)) * share;
      return &s.all_gather;
    case OpId::ReduceScatter:
      bytes = static_cast<double>(bytes_of(input)) * share;
      return &s.reduce_scatter;
    case OpId::AllReduce:
      bytes = 2 * static_cast<double>(bytes_of(input)) * share;
      return &s.all_reduce;
    case OpId::Broadcast:
      bytes = static_cast<double>(bytes_of(input)) * share;
      return &s.broadcast;
    // no traffic formula: add_collective fails its check
    FSDPC_CASES_EXCEPT_COLLECTIVE
    case OpId::Synchronize: case OpId::Wait: case OpId::Send: case OpId::Recv:
      return nullptr;
  }
  op_outside_table(b.op);
}

void add_collective(TraceStats& s, const BoundSymbol& b,
                    const std::unordered_map<std::string, TensorType>& types) {
  if (b.op == OpId::Synchronize) ++s.synchronize_count;
  if (!op_info(b.op).has(OpTrait::issue)) return;
  if (op_info(b.op).has(OpTrait::p2p)) {
    CollectiveStats& p2p = b.op == OpId::Send ? s.send : s.recv;
    ++p2p.count;
    p2p.bytes += static_cast<double>(bytes_of(b.output().type));
    return;
  }
  auto in = types.find(b.inputs.at(0).name);
  if (in == types.end()) fail("stats: ", op_name(b.op), " uses ", b.inputs[0].name,
                              ", which is not defined");
  double bytes = 0;
  CollectiveStats* entry = account(s, b, in->second, bytes);
  FSDPC_CHECK(entry) << "collective " << op_name(b.op) << " has no traffic formula";
  ++entry->count;
  entry->bytes += bytes;
  ++s.collective_count;
  s.collective_bytes += bytes;
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

TraceStats trace_stats(const Trace& trace) {
  TraceStats s;
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
  j["collectives"] = Json{{"all_gather", entry(s.all_gather)},
                          {"reduce_scatter", entry(s.reduce_scatter)},
                          {"all_reduce", entry(s.all_reduce)},
                          {"broadcast", entry(s.broadcast)}};
  j["point_to_point"] = Json{{"send", entry(s.send)}, {"recv", entry(s.recv)}};
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
  auto row = [&](const char* name, int64_t count, double bytes) {
    std::snprintf(line, sizeof line, "  %-15s %5lld  %s\n", name, static_cast<long long>(count),
                  with_unit(bytes).c_str());
    out += line;
  };
  row("all_gather", s.all_gather.count, s.all_gather.bytes);
  row("reduce_scatter", s.reduce_scatter.count, s.reduce_scatter.bytes);
  row("all_reduce", s.all_reduce.count, s.all_reduce.bytes);
  row("broadcast", s.broadcast.count, s.broadcast.bytes);
  row("total", s.collective_count, s.collective_bytes);
  if (s.send.count || s.recv.count) {
    out += "point to point (pipeline stages; bytes sent, and received):\n";
    row("send", s.send.count, s.send.bytes);
    row("recv", s.recv.count, s.recv.bytes);
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
