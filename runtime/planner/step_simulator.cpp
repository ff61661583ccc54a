// simulate_step(): the traces replayed on a clock per stream, each statement
// priced by the cost model below. Deterministic: no measurement, no
// randomness, the same traces and profile give the same seconds.
#include "runtime/planner/step_simulator.h"

#include <algorithm>
#include <type_traits>
#include <unordered_map>
#include <variant>

#include "ir/error.h"

namespace fsdpc {

namespace {

double bytes_of(const TensorType& t) { return static_cast<double>(numel(t.shape) * dtype_size(t.dtype)); }

// A group collective's issue (OpTrait::issue, not p2p): simulate_step prices
// it on its group's stream, and it costs no compute-stream time or memory
// traffic. send and recv issue too, but simulate_step takes a stage's
// transfer as done (pipeline_timing.h prices it between stages), so it never
// asks memory_bytes() or launch_seconds() about them; those price them as
// compute statements, and the profiler reports that as their bytes.
bool is_group_issue(OpId op) { return op_info(op).has(OpTrait::issue) && !op_info(op).has(OpTrait::p2p); }

// The matmul rate of a statement's operands: low precision runs on the
// bf16 tensor cores, everything else at the f32 rate.
double matmul_rate(const InputTypes& inputs, const HardwareProfile& hw) {
  const bool low = !inputs.empty() && inputs[0] && (inputs[0]->dtype == DType::bf16 || inputs[0]->dtype == DType::f16);
  return (low ? hw.peak_flops_bf16.value : hw.peak_flops_f32.value) * hw.matmul_sustained_fraction.value;
}

}  // namespace

double matmul_flops(const BoundSymbol& b, const InputTypes& inputs) {
  if (b.outputs.empty() || inputs.empty() || !inputs[0]) return 0;
  const double out = static_cast<double>(numel(b.outputs[0].type.shape));
  if (b.op == OpId::Matmul || b.op == OpId::Linear)  // x [..., K]: every output element is a K-long dot product
    return inputs[0]->shape.empty() ? 0 : 2.0 * out * static_cast<double>(inputs[0]->shape.back());
  if (b.op == OpId::ScaledDotProductAttention) {  // q [.., T, D], k [.., S, D], v [.., S, Dv]
    if (inputs.size() < 3 || !inputs[1] || !inputs[2] || inputs[0]->shape.size() < 2) return 0;
    const Shape& q = inputs[0]->shape;
    const double rows = static_cast<double>(numel(q)) / static_cast<double>(q.back());  // B*H*T
    const double s = static_cast<double>(inputs[1]->shape.end()[-2]);
    return 2.0 * rows * s * static_cast<double>(q.back() + inputs[2]->shape.back());  // QK^T, then PV
  }
  switch (b.op) {
    // A region's matmuls (transposes folded into a matmul make one), or a
    // composite's, through its decomposition (linear and attention: above).
    FSDPC_FUSION_CASES
    FSDPC_COMPOSITE_CASES {
      std::unordered_map<std::string, const TensorType*> types;
      for (size_t i = 0; i < b.inputs.size() && i < inputs.size(); ++i)
        if (!b.inputs[i].is_scalar()) types[b.inputs[i].name] = inputs[i];
      double flops = 0;
      for (const BoundSymbol& sub : b.subsymbols) {
        InputTypes sub_inputs;
        for (const Operand& x : sub.inputs) {
          auto it = x.is_scalar() ? types.end() : types.find(x.name);
          sub_inputs.push_back(it == types.end() ? nullptr : it->second);
        }
        flops += matmul_flops(sub, sub_inputs);
        for (const Proxy& o : sub.outputs) types[o.name] = &o.type;
      }
      return flops;
    }
    FSDPC_MATMUL_CASES  // matmul: above
    FSDPC_ELEMENTWISE_CASES
    FSDPC_REDUCTION_CASES
    FSDPC_SHAPE_CASES
    FSDPC_INDEXING_CASES
    FSDPC_CREATION_CASES
    FSDPC_COLLECTIVE_CASES
    FSDPC_BUFFER_CASES
    FSDPC_MEMORY_CASES
      return 0;
  }
  op_outside_table(b.op);
}

namespace {

void append_attrs(std::string& out, const Attrs& attrs) {
  for (const auto& [key, value] : attrs.items()) {
    out += " " + key + "=";
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::string>) out += v;
          else if constexpr (std::is_same_v<V, bool>) out += v ? "true" : "false";
          else if constexpr (std::is_same_v<V, IntList>) {
            for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "[") + std::to_string(v[i]);
            out += v.empty() ? "[]" : "]";
          } else if constexpr (std::is_same_v<V, IntLists>) out += std::to_string(v.size()) + " lists";
          else out += std::to_string(v);
        },
        value);
  }
}

// matmul_signature() of a statement known to have matmul FLOPs.
std::string signature(const BoundSymbol& b, const InputTypes& inputs) {
  std::string key(op_name(b.op));
  append_attrs(key, b.attrs);
  // A region's statements are what it runs; a composite's (linear's,
  // attention's) are only its decomposition.
  if (b.op == OpId::Fusion)
    for (const BoundSymbol& sub : b.subsymbols) {
      key += std::string(" (") + std::string(op_name(sub.op));
      append_attrs(key, sub.attrs);
      key += ")";
    }
  key += " |";
  for (const TensorType* t : inputs) key += " " + (t ? type_str(*t) : std::string("scalar"));
  return key;
}

}  // namespace

std::string matmul_signature(const BoundSymbol& b, const InputTypes& inputs) {
  return matmul_flops(b, inputs) > 0 ? signature(b, inputs) : "";
}

void for_each_statement(const Trace& t, const std::function<void(const BoundSymbol&, const InputTypes&)>& fn) {
  std::unordered_map<std::string, const TensorType*> types;
  for (const Proxy& a : t.args) types[a.name] = &a.type;
  InputTypes inputs;
  for (const BoundSymbol& b : t.bsyms) {
    inputs.clear();
    for (const Operand& o : b.inputs) {
      auto it = o.is_scalar() ? types.end() : types.find(o.name);
      inputs.push_back(it == types.end() ? nullptr : it->second);
    }
    fn(b, inputs);
    for (const Proxy& p : b.outputs) types[p.name] = &p.type;
  }
}

double memory_bytes(const BoundSymbol& b, const InputTypes& inputs) {
  if (b.op == OpId::Reshape || b.op == OpId::Wait || b.op == OpId::Del || is_group_issue(b.op)) return 0;
  double bytes = 0;
  for (const TensorType* t : inputs)
    if (t) bytes += bytes_of(*t);
  for (const Proxy& p : b.outputs) bytes += bytes_of(p.type);
  return bytes;
}

double launch_seconds(const BoundSymbol& b, double flops, const HardwareProfile& hw) {
  if (b.op == OpId::Reshape || b.op == OpId::Del || b.op == OpId::Wait || is_group_issue(b.op)) return 0;
  // A region holding a matmul (its transposes folded in) launches as one.
  if (flops > 0 && hw.matmul_overhead.value > 0) return hw.matmul_overhead.value;
  if (flops <= 0 && b.op == OpId::Fusion && hw.region_overhead.value > 0) return hw.region_overhead.value;
  return hw.kernel_overhead.value;
}

double compute_seconds(const BoundSymbol& b, const InputTypes& inputs, const HardwareProfile& hw) {
  if (b.op == OpId::Reshape) return 0;
  const double f = matmul_flops(b, inputs);
  if (f > 0) {
    if (!hw.matmul_seconds.empty())
      if (auto it = hw.matmul_seconds.find(signature(b, inputs)); it != hw.matmul_seconds.end())
        return launch_seconds(b, f, hw) + it->second;
    return launch_seconds(b, f, hw) + f / matmul_rate(inputs, hw);
  }
  const double moved = memory_bytes(b, inputs) / (hw.memory_bandwidth.value * hw.memory_sustained_fraction.value);
  if (b.op == OpId::Fusion && hw.elementwise_rate.value > 0) {
    bool rows = false;
    for (const BoundSymbol& sub : b.subsymbols) rows = rows || sub.op == OpId::Sum || sub.op == OpId::Amax;
    const double rate = rows && hw.row_region_rate.value > 0 ? hw.row_region_rate.value : hw.elementwise_rate.value;
    return launch_seconds(b, f, hw) + std::max(moved, region_element_ops(b) / rate);
  }
  return launch_seconds(b, f, hw) + moved;
}

double region_element_ops(const BoundSymbol& b) {
  double ops = 0;
  for (const BoundSymbol& sub : b.subsymbols)
    for (const Proxy& o : sub.outputs) ops += static_cast<double>(numel(o.type.shape));
  return ops;
}

double collective_payload(const BoundSymbol& b) {
  // reduce_scatter's input is `size` times its output (padded to divide).
  const double out = bytes_of(b.outputs.at(0).type);
  return b.op == OpId::ReduceScatter ? out * static_cast<double>(b.attrs.get_int("size")) : out;
}

double collective_rank_bytes(OpId op, double payload, int p) {
  if (p <= 1) return 0;
  const double ring = payload * (p - 1) / p;
  return op == OpId::AllReduce ? 2 * ring : ring;
}

double collective_seconds(OpId op, double payload, int p, double latency, double bandwidth) {
  if (p <= 1) return 0;
  const double one = latency * (p - 1) + payload * (p - 1) / p / bandwidth;
  return op == OpId::AllReduce ? 2 * one : one;
}

bool group_crosses_nodes(const Mesh& mesh, const std::string& group, int gpus_per_node) {
  if (gpus_per_node < 1) fail("gpus per node must be at least 1, got ", gpus_per_node);
  for (int r = 0; r < mesh.world(); ++r) {
    const std::vector<int> ranks = mesh.group_ranks(group, r);
    for (int q : ranks)
      if (q / gpus_per_node != ranks.front() / gpus_per_node) return true;
  }
  return false;
}

double StepSimulation::comm_bytes() const {
  double total = 0;
  for (const CommStream& s : streams) total += s.bytes;
  return total;
}

StepSimulation simulate_step(const std::vector<const Trace*>& traces, const Mesh& mesh, const HardwareProfile& hw,
                             double extra_compute) {
  StepSimulation sim;
  const int per_node = static_cast<int>(hw.gpus_per_node.value);
  std::unordered_map<std::string, size_t> stream_of;  // group -> index in sim.streams
  std::vector<double> stream_free;                    // when each stream is next idle
  double now = 0;                                     // the compute stream's clock
  // future -> when its collective ends; a later trace may wait on it
  // (Streaming DiLoCo's land waits on its issue's futures).
  std::unordered_map<std::string, double> done;
  for (const Trace* t : traces) {
    for_each_statement(*t, [&](const BoundSymbol& b, const InputTypes& inputs) {
      if (b.op == OpId::Del) return;
      if (op_info(b.op).has(OpTrait::p2p)) {
        // A pipeline stage's transfer: its time is between two stages, which
        // runtime/planner/pipeline_timing.h prices; within the stage it is done.
        done[b.outputs.at(0).name] = now;
      } else if (op_info(b.op).has(OpTrait::issue)) {
        const std::string& group = b.attrs.get_str("group");
        auto [it, fresh] = stream_of.try_emplace(group, sim.streams.size());
        if (fresh) {
          const int size = mesh.group_size(group);
          sim.streams.push_back({group, size, group_crosses_nodes(mesh, group, per_node), 0, 0, 0});
          stream_free.push_back(0);
        }
        CommStream& s = sim.streams[it->second];
        const int p = static_cast<int>(b.attrs.get_int("size"));
        const LinkProfile& link = s.inter_node ? hw.inter_node : hw.intra_node;
        const double payload = collective_payload(b);
        const double seconds = collective_seconds(b.op, payload, p, link.latency.value, link.effective_bandwidth(b.op));
        const double sent = collective_rank_bytes(b.op, payload, p);
        if (p > 1) {  // a group of one issues nothing (the MPI executor copies)
          const double host =
              link.host_overhead.value + (link.host_bandwidth.value > 0 ? sent / link.host_bandwidth.value : 0);
          now += host;
          sim.compute += host;
          sim.comm_host += host;
        }
        const double start = std::max(now, stream_free[it->second]);
        stream_free[it->second] = start + seconds;
        done[b.outputs.at(0).name] = start + seconds;
        ++s.count;
        s.bytes += sent;
        s.busy += seconds;
      } else if (b.op == OpId::Wait) {
        auto it = done.find(b.inputs.at(0).name);
        FSDPC_CHECK(it != done.end()) << "simulate_step: wait on " << b.inputs.at(0).name << " before its collective";
        if (it->second > now) {
          sim.blocked += it->second - now;
          now = it->second;
        }
      } else {
        const double seconds = compute_seconds(b, inputs, hw);
        const double flops = matmul_flops(b, inputs);
        sim.flops += flops;
        if (flops > 0) sim.matmul += seconds;
        sim.compute += seconds;
        now += seconds;
      }
    });
  }
  for (double f : stream_free) now = std::max(now, f);
  sim.compute += extra_compute;
  sim.seconds = now + extra_compute;
  return sim;
}

}  // namespace fsdpc
