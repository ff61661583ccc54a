// Simulated collectives: with every rank stepped in lockstep, a collective is
// a plain function of the inputs its group's members hold right now. Each
// rank finds its group on the mesh and combines its members' values in
// group-rank order, so every member computes the identical result.
#include <algorithm>
#include <string>

#include "executors/reference/reference_internal.h"

namespace fsdpc::reference {

namespace {

std::string mesh_str(const Mesh& mesh) {
  if (mesh.replicas == 1) return "flat mesh of " + std::to_string(mesh.world()) + " ranks";
  return std::to_string(mesh.replicas) + "x" + std::to_string(mesh.shards) +
         " mesh (replicas x shards)";
}

// The trace's `size` must be the group's size on the mesh it runs on: a trace
// compiled for another world size would otherwise compute silently wrong shapes.
void check_group_size(const BoundSymbol& b, const Mesh& mesh, const std::string& group_key,
                      const std::string& size_key) {
  const std::string& group = b.attrs.get_str(group_key);
  const int64_t size = b.attrs.get_int(size_key);
  const int actual = mesh.group_size(group);
  if (size != actual)
    fail(op_name(b.op), " -> ", b.output().name, ": ", group_key, " '", group, "' has ", actual,
         " ranks on a ", mesh_str(mesh), ", but the trace says ", size_key, "=", size);
}

// What one rank sees of a collective: its group's inputs and its place there.
struct Group {
  std::vector<const Value*> inputs;  // in group-rank order
  size_t me = 0;
};

Data sum_of(const Group& g) {
  Data d = g.inputs[0]->data;
  for (size_t m = 1; m < g.inputs.size(); ++m)
    for (size_t i = 0; i < d.size(); ++i) d[i] += g.inputs[m]->data[i];
  return d;
}

Data max_of(const Group& g) {
  Data d = g.inputs[0]->data;
  for (size_t m = 1; m < g.inputs.size(); ++m)
    for (size_t i = 0; i < d.size(); ++i) d[i] = std::max(d[i], g.inputs[m]->data[i]);
  return d;
}

// Members' inputs side by side along `dim`, in group order.
Data concat(const Group& g, int64_t dim, const TensorType& out) {
  const Strides os = row_major_strides(out.shape);
  Data d(numel(out.shape));
  for (size_t m = 0; m < g.inputs.size(); ++m) {
    const Value& x = *g.inputs[m];
    const Shape& xs = x.type.shape;
    const int64_t base = static_cast<int64_t>(m) * xs[dim] * os[dim];
    walk2(xs, row_major_strides(xs), 0, os, base, [&](int64_t from, int64_t to) { d[to] = x.data[from]; });
  }
  return d;
}

// The sum, of which member `me` keeps the me-th equal chunk along `dim`.
Data reduce_scatter(const Group& g, int64_t dim, const TensorType& out) {
  const Data full = sum_of(g);
  const Shape& fs = g.inputs[0]->type.shape;
  const Strides fst = row_major_strides(fs);
  const int64_t base = static_cast<int64_t>(g.me) * out.shape[dim] * fst[dim];
  Data d(numel(out.shape));
  walk2(out.shape, fst, base, row_major_strides(out.shape), 0, [&](int64_t from, int64_t to) { d[to] = full[from]; });
  return d;
}

// Un-lowered synchronize: a sharded value is all-gathered along dim 0 and the
// padding rows dropped (rows are contiguous, so that is a prefix); a
// replicated one is already whole.
Data synchronize(const Group& g, const TensorType& out) {
  const Value& x = *g.inputs[g.me];
  if (x.type.dist != DistType::fully_sharded) return x.data;
  Data d;
  for (const Value* v : g.inputs) d.insert(d.end(), v->data.begin(), v->data.end());
  d.resize(numel(out.shape));
  return d;
}

Data combine(const BoundSymbol& b, const Group& g, const TensorType& out) {
  switch (b.op) {
    case OpId::AllGather: return concat(g, b.attrs.get_int("dim"), out);
    case OpId::ReduceScatter: return reduce_scatter(g, b.attrs.get_int("dim"), out);
    case OpId::AllReduce: return b.attrs.get_str("op") == "max" ? max_of(g) : sum_of(g);
    case OpId::Broadcast: return g.inputs[b.attrs.get_int("root")]->data;
    case OpId::Synchronize: return synchronize(g, out);
    // not simulated collectives: the check below
    FSDPC_CASES_EXCEPT_COLLECTIVE
    case OpId::Wait: case OpId::Send: case OpId::Recv:
      break;
  }
  FSDPC_CHECK(false) << op_name(b.op) << " is not a simulated collective";
  return {};
}

}  // namespace

bool is_cross_rank(OpId op) {
  return op == OpId::AllGather || op == OpId::ReduceScatter || op == OpId::AllReduce ||
         op == OpId::Broadcast || op == OpId::Synchronize || op == OpId::AxisIndex;
}

void run_collective(const BoundSymbol& b, const Mesh& mesh, std::vector<Env>& envs) {
  check_group_size(b, mesh, "group", "size");
  const Proxy& out = b.output();
  const std::string& group = b.attrs.get_str("group");
  if (b.op == OpId::AxisIndex) {  // no input: each rank's place in its group
    for (size_t r = 0; r < envs.size(); ++r) {
      const std::vector<int> members = mesh.group_ranks(group, static_cast<int>(r));
      const auto at = std::find(members.begin(), members.end(), static_cast<int>(r));
      FSDPC_CHECK(at != members.end()) << "rank " << r << " is not in its own group " << group;
      envs[r][out.name] = Value{out.type, Data{static_cast<double>(at - members.begin())}};
    }
    return;
  }
  // Hybrid synchronize names its replica group too; only the backward uses it.
  if (b.op == OpId::Synchronize && b.attrs.has("replicate_group"))
    check_group_size(b, mesh, "replicate_group", "replicate_size");
  const std::string& input = b.inputs.at(0).name;
  std::vector<Data> results(envs.size());
  for (size_t r = 0; r < envs.size(); ++r) {
    Group g;
    for (int m : mesh.group_ranks(group, static_cast<int>(r))) {
      if (m == static_cast<int>(r)) g.me = g.inputs.size();
      g.inputs.push_back(&lookup(envs[m], input));
      FSDPC_CHECK(g.inputs.back()->type.shape == g.inputs.front()->type.shape)
          << op_name(b.op) << ": ranks hold different shapes of " << input;
    }
    results[r] = combine(b, g, out.type);
  }
  for (size_t r = 0; r < envs.size(); ++r) {
    FSDPC_CHECK(static_cast<int64_t>(results[r].size()) == numel(out.type.shape))
        << op_name(b.op) << " gave " << results[r].size() << " values for " << type_str(out.type);
    envs[r][out.name] = Value{out.type, std::move(results[r])};
  }
}

}  // namespace fsdpc::reference
