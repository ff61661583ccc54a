// gather_once: the step-level traces of --keep-gathered. Under zero3 every
// micro-batch's forward gathers each parameter again, and its backward
// reduces each gradient; with K micro-batches a step moves the model K (or
// 2K) times. Keeping the gathered parameters across the micro-batches, as
// the FSDP material recommends under pipeline parallelism, moves it once:
// `gather` before the first micro-batch, micro-batches that run unsharded
// without synchronising (no_shard, no_sync), and `reduce` after the last.
//
// Pre:  the fsdp pass's output: each parameter argument is read through one
//       synchronize (passes/fsdp.h).
// Post: gather(shards...) -> full parameters; reduce(grad_<p>...) -> reduced
//       gradient shards; both verify and carry `del`s. Each synchronize is
//       lowered by the same functions autodiff uses, so the 1/N scaling,
//       padding and collectives are the synchronising step's.
#include "passes/gather_once.h"

#include <unordered_map>
#include <unordered_set>

#include "ir/builder.h"
#include "ir/error.h"
#include "passes/del.h"
#include "passes/quantize_gathers.h"
#include "passes/schedule.h"
#include "passes/vjp_rules.h"

namespace fsdpc {

GatherOnceTraces gather_once_traces(const Trace& sharded, bool int8_gathers) {
  std::unordered_map<std::string, const BoundSymbol*> sync_of;  // parameter argument -> its synchronize
  std::unordered_set<std::string> params;
  for (const Proxy& a : sharded.args)
    if (a.is_param()) params.insert(a.name);
  for (const BoundSymbol& b : sharded.bsyms)
    if (b.op == OpId::Synchronize && params.count(b.inputs.at(0).name)) sync_of.emplace(b.inputs[0].name, &b);

  GatherOnceTraces out;
  Trace& gather = out.gather;
  gather.name = "gather";
  Trace& reduce = out.reduce;
  reduce.name = "reduce";
  TraceBuilder gb(gather), rb(reduce);
  std::vector<ReturnTree> full, reduced;
  for (const Proxy& a : sharded.args) {
    if (!a.is_param()) continue;
    auto it = sync_of.find(a.name);
    if (it == sync_of.end())
      fail("--keep-gathered: parameter ", a.param_path, " (", a.name,
           ") is never read by this trace, so there is nothing to gather it for");
    const BoundSymbol& sync = *it->second;
    gb.add_arg(a);
    full.push_back(ReturnTree::leaf(lower_synchronize(gb, sync).name));
    if (!a.requires_grad) continue;
    Proxy g{"grad_" + a.name, sync.outputs.at(0).type, "", true};
    g.type.dist = DistType::none;
    rb.add_arg(g);
    reduced.push_back(ReturnTree::leaf(reduce_synchronized_grad(rb, sync, a.type, g).name));
  }
  gather.returns = ReturnTree::tuple(std::move(full));
  reduce.returns = ReturnTree::tuple(std::move(reduced));
  if (int8_gathers) gather = quantize_gathers(gather);
  issue_before_waiting(gather);
  issue_before_waiting(reduce);
  for (Trace* t : {&gather, &reduce}) {
    *t = insert_dels(*t);
    t->provenance = "gather_once";
  }
  return out;
}

}  // namespace fsdpc
