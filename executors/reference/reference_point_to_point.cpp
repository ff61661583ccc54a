// Simulated send and recv between pipeline stages. Stages are different
// traces, run one after another, so a message cannot be combined in lockstep
// like a collective: send leaves it in a Mailbox queue for a later run, and
// recv takes the oldest one, which is MPI's non-overtaking order.
#include <string>
#include <utility>

#include "executors/reference/reference_internal.h"

namespace fsdpc::reference {

namespace {

std::string desc(const TensorType& t) { return std::string(dtype_name(t.dtype)) + shape_str(t.shape); }

// "send ft3" / "recv ft4": what every message names the statement by (recv
// has no input, so the future it defines).
std::string label(const BoundSymbol& b) { return std::string(op_name(b.op)) + " " + b.output().name; }

// This run's position and the peer, checked against each other and the group.
std::pair<int, int> ends(const BoundSymbol& b, const Mailbox* mailbox) {
  if (!mailbox) fail(label(b), ": point-to-point ops need a Mailbox (reference::run_spmd's mailbox argument)");
  const std::string& group = b.attrs.get_str("group");
  const int64_t size = b.attrs.get_int("size");
  const int64_t peer = b.attrs.get_int("peer");
  const int position = mailbox->position;
  if (position < 0 || position >= size)
    fail(label(b), ": the mailbox's position ", position, " is outside group '", group, "' of size ", size);
  if (peer == position)
    fail(label(b), ": peer ", peer, " is this run's own position in group '", group,
         "'; a message goes to another stage");
  return {position, static_cast<int>(peer)};
}

// Every rank's message is checked before any is taken, so a failed recv
// leaves the mailbox as it was.
void receive(const BoundSymbol& b, Mailbox& mailbox, int from, int to, std::vector<Env>& envs) {
  const Proxy& out = b.output();
  const int ranks = static_cast<int>(envs.size());
  for (int r = 0; r < ranks; ++r) {
    auto it = mailbox.queues.find({from, to, r});
    if (it == mailbox.queues.end() || it->second.empty())
      fail(label(b), ": no message waiting from peer ", from, " to position ", to, " for local rank ", r,
           " (group '", b.attrs.get_str("group"), "'; the sender's stage has not run, or sent fewer)");
    const TensorType& got = it->second.front().type;
    if (got.shape != out.type.shape || got.dtype != out.type.dtype)
      fail(label(b), ": the message from peer ", from, " to position ", to, " (local rank ", r, ") is ", desc(got),
           ", but the recv expects ", desc(out.type));
  }
  for (int r = 0; r < ranks; ++r) {
    std::deque<Value>& queue = mailbox.queues.at({from, to, r});
    envs[r][out.name] = Value{out.type, std::move(queue.front().data)};
    queue.pop_front();
  }
}

}  // namespace

bool is_point_to_point(OpId op) { return op_info(op).has(OpTrait::p2p); }

void run_point_to_point(const BoundSymbol& b, Mailbox* mailbox, std::vector<Env>& envs) {
  const auto [position, peer] = ends(b, mailbox);
  if (b.op == OpId::Recv) {
    receive(b, *mailbox, peer, position, envs);
    return;
  }
  FSDPC_CHECK(b.op == OpId::Send) << op_name(b.op) << " is not a point-to-point op";
  const Proxy& out = b.output();
  const std::string& input = b.inputs.at(0).name;
  for (size_t r = 0; r < envs.size(); ++r) {
    const Value& x = lookup(envs[r], input);
    mailbox->queues[{position, peer, static_cast<int>(r)}].push_back(x);
    envs[r][out.name] = Value{out.type, x.data};  // the sender keeps its value
  }
}

}  // namespace fsdpc::reference
