// fsdp: the sharding transform. Every parameter becomes what one rank holds
// and a `synchronize` is inserted right before its first use, exactly as the
// Thunder FSDP tutorial does by hand; autodiff later lowers each synchronize
// to its collectives (docs/ir.md).
//
// Pre:  a captured trace; parameter arguments are unsharded (dist none).
// Post: zero3/zero2: each parameter is fully_sharded over group dp, dim 0
//       padded to ceil(d0/world) rows per rank; hybrid*: the same over group
//       shard, with replicate_group=replicate for the gradient all_reduce
//       (none under DiLoCo, whose outer step syncs the replicas);
//       no_shard: each parameter is replicated over dp. One synchronize per
//       parameter, before its first use; every later use reads its output.
//
//   t0 = linear(x, t_0_weight)
// becomes, for zero3 over 2 ranks (t_0_weight: "cpu f32[32, 64]" fully_sharded):
//   t5 = synchronize(t_0_weight, group=dp, size=2, shape=[64, 64])
//   t0 = linear(x, t5)
#include "passes/fsdp.h"


#include "ir/builder.h"
#include "ir/error.h"

namespace fsdpc {

int64_t shard_rows(int64_t d0, int64_t size) { return (d0 + size - 1) / size; }

namespace {

struct Plan {
  std::string group;
  int64_t size = 1;
  std::string replicate_group;  // hybrid only
  int64_t replicate_size = 1;
  bool shard = true;
};

Plan make_plan(const FsdpOptions& o) {
  const Mesh& m = o.mesh;
  if (m.replicas < 1 || m.shards < 1) fail("mesh ", m.replicas, ",", m.shards, " must have positive sizes");
  if (is_hybrid(o.strategy))
    return o.sync_replicas ? Plan{"shard", m.shards, "replicate", m.replicas, true} : Plan{"shard", m.shards, "", 1, true};
  if (m.replicas != 1)
    fail("a ", m.replicas, "x", m.shards, " mesh needs a hybrid strategy; ", strategy_name(o.strategy),
         " runs on a flat world");
  return Plan{"dp", m.shards, "", 1, o.strategy != Strategy::no_shard};
}

// The argument a rank receives for parameter `p`, and the synchronize attrs.
Attrs shard_param(Proxy& p, const Plan& plan) {
  Attrs attrs{{"group", plan.group}, {"size", plan.size}};
  // A 0-d parameter has no dim 0 to split: it stays replicated.
  if (plan.shard && !p.type.shape.empty()) {
    attrs.set("shape", p.type.shape);
    p.type.shape[0] = shard_rows(p.type.shape[0], plan.size);
    p.type.dist = DistType::fully_sharded;
  } else {
    p.type.dist = DistType::replicated;
  }
  if (!plan.replicate_group.empty()) {
    attrs.set("replicate_group", plan.replicate_group);
    attrs.set("replicate_size", plan.replicate_size);
  }
  return attrs;
}

}  // namespace

Trace fsdp(const Trace& trace, const FsdpOptions& options) {
  const Plan plan = make_plan(options);
  Trace out;
  out.name = trace.name;
  out.provenance = "fsdp";
  out.returns = trace.returns;
  out.next_id = trace.next_id;

  std::unordered_map<std::string, Attrs> sync_attrs;  // parameter -> synchronize attrs
  for (Proxy p : trace.args) {
    if (p.is_param()) {
      if (p.type.dist != DistType::none)
        fail("fsdp: parameter ", p.name, " is already ", dist_name(p.type.dist));
      sync_attrs[p.name] = shard_param(p, plan);
    }
    out.args.push_back(std::move(p));
  }

  TraceBuilder b(out);
  std::unordered_map<std::string, std::string> synced;  // parameter -> synchronize output
  for (const BoundSymbol& bsym : trace.bsyms) {
    // Synchronize every parameter this statement (or its decomposition) reads.
    for_each_bsym(std::vector<BoundSymbol>{bsym}, [&](const BoundSymbol& s) {
      for (const Operand& in : s.inputs) {
        auto it = sync_attrs.find(in.name);
        if (it == sync_attrs.end() || synced.count(in.name)) continue;
        synced[in.name] = b.emit1(OpId::Synchronize, {Operand::of(in.name)}, it->second).name;
      }
    });
    BoundSymbol copy = bsym;
    rename_uses(copy, synced);
    // Tensor parallelism's f of a replicated parameter (sequence
    // parallelism's norm weights) now reads the gathered parameter, and
    // passes on its distribution.
    if (copy.op == OpId::Synchronize && synced.count(bsym.inputs.at(0).name))
      copy.outputs.at(0).type.dist = DistType::replicated;
    b.append(std::move(copy));
  }
  // A parameter returned as it is (rare) is returned gathered.
  std::vector<std::string> names;
  trace.returns.collect_names(names);
  for (const std::string& n : names)
    if (sync_attrs.count(n) && !synced.count(n)) fail("fsdp: parameter ", n, " is returned unused; not supported");
  rename_returns(out.returns, synced);
  return out;
}

}  // namespace fsdpc
