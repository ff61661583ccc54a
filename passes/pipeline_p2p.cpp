// pipeline_p2p: the transfers between pipeline stages, as ops of the stage's
// own traces, so dumps show them, schedule and del treat them as the
// collectives they are, and the memory plan counts what they hold. They are
// placed after split, where each trace's boundary is known: autodiff never
// sees them (a stage's backward gets its output's gradient as grad's
// cotangent argument and returns its input's as an input gradient).
//
// Pre:  split() of a pipeline stage's joint trace (passes/pipeline_p2p.h).
// Post: the forward's boundary argument is a recv, its boundary return a
//       send; the backward's cotangent argument a recv, its last return (the
//       input's gradient) a send.
//
//   forward(idx, targets, t60, params)       ->  ft90 = recv(group=pp, size=2, peer=0, shape=[2, 64, 64], ...)
//                                                ... t60 = wait(ft90)   (before t60's first reader)
//   backward(saved..., cotangent)            ->  ft91 = recv(..., peer=1, ...); cotangent = wait(ft91) ...
//     t300 = add(...) ... return (..., t300)    t300 = add(...); ft95 = send(t300, group=pp, size=2, peer=0)
//                                                ... t96 = wait(ft95); return (..., t96)
#include "passes/pipeline_p2p.h"

#include <algorithm>

#include "ir/builder.h"
#include "ir/error.h"
#include "passes/grad.h"

namespace fsdpc {

namespace {

constexpr const char* kGroup = "pp";

Attrs peer_attrs(const PipelineStagePeers& p, int peer) {
  return Attrs{{"group", std::string(kGroup)}, {"size", int64_t{p.stages}}, {"peer", int64_t{peer}}};
}

// `t` with argument `name` removed and received from `peer` instead.
Trace receive_arg(const Trace& t, const std::string& name, const PipelineStagePeers& p, int peer) {
  const auto arg = std::find_if(t.args.begin(), t.args.end(), [&](const Proxy& a) { return a.name == name; });
  FSDPC_CHECK(arg != t.args.end()) << t.name << ": no boundary argument " << name;
  Trace out = without_statements(t, "p2p");
  out.args.erase(out.args.begin() + (arg - t.args.begin()));
  TraceBuilder b(out);
  Attrs attrs = peer_attrs(p, peer);
  attrs.set("shape", IntList(arg->type.shape));
  attrs.set("dtype", std::string(dtype_name(arg->type.dtype)));
  attrs.set("device", device_name(arg->type.device));
  // Posted first, waited for just before its first reader: the statements
  // before (the stage's first all_gathers) are issued while it arrives.
  const Proxy future = b.emit1(OpId::Recv, {}, std::move(attrs));
  auto reads = [&](const BoundSymbol& s) {
    return std::any_of(s.inputs.begin(), s.inputs.end(), [&](const Operand& in) { return in.name == name; });
  };
  bool waited = false;
  for (const BoundSymbol& s : t.bsyms) {
    if (!waited && reads(s)) {
      b.emit1(OpId::Wait, {Operand::of(future.name)});
      out.bsyms.back().outputs[0].name = name;  // its readers name it so
      out.bsyms.back().outputs[0].type.dist = arg->type.dist;
      waited = true;
    }
    out.bsyms.push_back(s);
  }
  FSDPC_CHECK(waited) << t.name << ": nothing reads the boundary argument " << name;
  return out;
}

// Sends the value `leaf` names to `peer` as soon as it is computed (the
// next stage starts on it while this one finishes), waited for at the end;
// the leaf then names the sent value (the wait's), which keeps the send alive.
void send_leaf(Trace& t, ReturnTree& leaf, const PipelineStagePeers& p, int peer) {
  TraceBuilder b(t);
  b.emit1(OpId::Send, {Operand::of(leaf.name)}, peer_attrs(p, peer));
  BoundSymbol send = std::move(t.bsyms.back());
  t.bsyms.pop_back();
  auto def = std::find_if(t.bsyms.begin(), t.bsyms.end(), [&](const BoundSymbol& s) {
    return std::any_of(s.outputs.begin(), s.outputs.end(), [&](const Proxy& o) { return o.name == leaf.name; });
  });
  const std::string future = send.output().name;
  t.bsyms.insert(def == t.bsyms.end() ? t.bsyms.begin() : def + 1, std::move(send));
  leaf.name = b.emit1(OpId::Wait, {Operand::of(future)}).name;
}

}  // namespace

SplitResult pipeline_p2p(const SplitResult& stage, const PipelineStagePeers& p) {
  if (p.stage < 0 || p.stage >= p.stages) fail("pipeline stage ", p.stage, " is outside ", p.stages, " stages");
  SplitResult out = stage;
  // One counter across the pair, so the forward's send and the backward's
  // recv of a boundary get different names.
  auto sync_counters = [&] { out.backward.next_id = std::max(out.backward.next_id, out.forward.next_id); };
  if (!p.input.empty()) {
    out.forward = receive_arg(stage.forward, p.input, p, p.stage - 1);
    sync_counters();
    ReturnTree& grads = out.backward.returns.is_tuple ? out.backward.returns.items.back() : out.backward.returns;
    FSDPC_CHECK(!grads.is_tuple) << "backward: the input's gradient is not its last return";
    send_leaf(out.backward, grads, p, p.stage - 1);
  }
  if (!p.output.empty()) {
    // The stage returns the boundary value alone (pipeline_split). Passes
    // may rename it (autocast re-emits the trace), so it is found by place.
    ReturnTree& outputs = out.forward.returns.items.at(0);
    FSDPC_CHECK(outputs.is_tuple && outputs.items.size() == 1 && !outputs.items[0].is_tuple)
        << "forward: the stage returns more than its boundary value " << p.output;
    send_leaf(out.forward, outputs.items[0], p, p.stage + 1);
    sync_counters();
    Trace received = receive_arg(out.backward, kCotangentArg, p, p.stage + 1);
    out.backward = std::move(received);
  }
  out.forward.provenance = out.backward.provenance = "p2p";
  return out;
}

}  // namespace fsdpc
