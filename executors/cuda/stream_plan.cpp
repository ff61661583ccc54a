// plan_streams (stream_plan.h): stream attributes and del placement.
#include "executors/cuda/stream_plan.h"

#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "ir/error.h"

namespace fsdpc::cuda {

namespace {

bool is_async_collective(const BoundSymbol& b) { return op_info(b.op).has(OpTrait::issue); }

}  // namespace

StreamKind stream_of(const BoundSymbol& b) {
  if (b.op == OpId::Del) return StreamKind::host;
  if (const AttrValue* s = b.attrs.find("stream"); s && std::get<std::string>(*s) == "comm")
    return StreamKind::comm;
  return StreamKind::compute;
}

Trace plan_streams(Trace claimed) {
  // The statements move from the claimed trace into the plan.
  std::vector<BoundSymbol> in = std::move(claimed.bsyms);
  claimed.bsyms.clear();
  Trace out = std::move(claimed);
  out.bsyms.reserve(in.size());
  // The collectives (by future) that may still touch each buffer, and the
  // buffers whose del waits for them, in the order their dels came.
  std::unordered_map<std::string, std::unordered_set<std::string>> busy;
  std::vector<std::string> deferred;
  for (BoundSymbol& src : in) {
    BoundSymbol b = std::move(src);
    if (b.executor == "nccl" && is_async_collective(b)) {
      FSDPC_CHECK(b.outputs.size() == 1 && b.outputs[0].type.future) << op_name(b.op) << " without a future";
      const std::string& future = b.outputs[0].name;
      b.attrs.set("stream", std::string("comm"));
      for (const Operand& o : b.inputs)
        if (!o.is_scalar()) busy[o.name].insert(future);
      busy[future].insert(future);
    } else if (b.executor == "nccl" && b.op == OpId::Wait) {
      b.attrs.set("stream", std::string("compute"));
    }
    if (b.op == OpId::Del) {
      // Keep the names no collective is using; hold back the others.
      std::vector<Operand> now;
      for (const Operand& o : b.inputs) {
        if (busy.count(o.name)) deferred.push_back(o.name);
        else now.push_back(o);
      }
      if (now.empty()) continue;
      b.inputs = std::move(now);
      out.bsyms.push_back(std::move(b));
      continue;
    }
    const bool is_wait = b.op == OpId::Wait;
    const std::string future = is_wait ? b.inputs.at(0).name : std::string();
    out.bsyms.push_back(std::move(b));
    if (!is_wait) continue;
    // The compute stream has now passed the collective: a buffer no other
    // pending collective uses is free to go. The future itself lives on as
    // the wait's output.
    for (auto it = busy.begin(); it != busy.end();) {
      it->second.erase(future);
      it = it->second.empty() ? busy.erase(it) : std::next(it);
    }
    BoundSymbol del;
    del.op = OpId::Del;
    std::vector<std::string> still;
    for (const std::string& n : deferred) {
      if (busy.count(n)) still.push_back(n);
      else del.inputs.push_back(Operand::of(n));
    }
    deferred = std::move(still);
    if (!del.inputs.empty()) out.bsyms.push_back(std::move(del));
  }
  FSDPC_CHECK(deferred.empty()) << out.name << ": a collective's buffers are freed but it is never waited";
  return out;
}

}  // namespace fsdpc::cuda
