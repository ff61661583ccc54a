// The step-time model: a deterministic simulation of one rank's execution
// traces (claimed, scheduled, del-placed) on a hardware profile. A pipeline
// stage's send and recv cost nothing here: the time between stages is
// runtime/planner/pipeline_timing.h's. One compute
// stream runs the statements in trace order; each process group (a mesh
// dimension: dp, or shard and replicate) has its own communication stream,
// where collectives run in the order the schedule issued them. A collective
// starts when issued (the compute before it done) and its stream is free; a
// wait blocks compute until its collective ends (which may have been issued
// by an earlier trace of the same simulation). Issuing one also costs the
// compute stream its link's host_overhead (starting, testing and completing
// it on the host) and its bytes at the link's host_bandwidth (the copies the
// host makes), charged at the issue. Every rank of a mesh runs
// the same traces on shards of the same shape, so one rank stands for all.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/mesh.h"
#include "ir/trace.h"
#include "runtime/planner/hardware_profile.h"

namespace fsdpc {

// Cost model, one statement at a time. `inputs` are the types of the
// statement's inputs, in order (nullptr for a scalar literal).
using InputTypes = std::vector<const TensorType*>;
// FLOPs of matmul, linear and scaled_dot_product_attention (2 per multiply-add); 0 otherwise.
double matmul_flops(const BoundSymbol& b, const InputTypes& inputs);
// Calls fn(statement, its inputs' types) for each statement of `t` in
// order (an input not defined in `t`, or a scalar literal, is nullptr).
void for_each_statement(const Trace& t, const std::function<void(const BoundSymbol&, const InputTypes&)>& fn);
// What identifies a matmul-family statement's cost: its op and attributes
// (a region: also its statements' ops and attributes, so the transposes a
// matmul reads in place count) and its inputs' types, e.g. "linear | cpu
// f32[256, 512] cpu f32[2048, 512] cpu f32[2048]"; "" for a statement
// without matmul FLOPs. The key of a profile's matmul_seconds.
std::string matmul_signature(const BoundSymbol& b, const InputTypes& inputs);
// Bytes a memory-bound statement reads and writes (tensor inputs + outputs);
// 0 for views (reshape), wait, del and collectives.
double memory_bytes(const BoundSymbol& b, const InputTypes& inputs);
// Host seconds to launch `b` (with `flops` matmul FLOPs): the profile's
// matmul_overhead for a matmul-family kernel (a region holding one
// included), region_overhead for any other fused region, kernel_overhead for
// every other statement, each falling back to kernel_overhead when not
// given; 0 for what launches no kernel (reshape, del) and for collectives
// and waits, which the communication streams price.
double launch_seconds(const BoundSymbol& b, double flops, const HardwareProfile& hw);
// A fused region's element-operations: the elements each of its statements
// writes, summed.
double region_element_ops(const BoundSymbol& b);
// Seconds on the compute stream: a matmul the profile measured
// (matmul_seconds) at that measurement, any other at the sustained matmul
// rate of the operands' dtype, other statements by bytes at the sustained
// memory bandwidth (a region without matmuls: or its element-operations at
// the profile's elementwise_rate, when given, whichever is longer), plus
// launch_seconds().
double compute_seconds(const BoundSymbol& b, const InputTypes& inputs, const HardwareProfile& hw);

// A collective's payload B: all_gather's output, the input of reduce_scatter,
// all_reduce and broadcast (bytes of the whole buffer, as passes/stats.h).
double collective_payload(const BoundSymbol& b);
// Alpha-beta ring model over p ranks: all_gather, reduce_scatter and
// broadcast cost alpha*(p-1) + (p-1)/p * B/bw; all_reduce twice that.
double collective_seconds(OpId op, double payload, int p, double latency, double bandwidth);
// Bytes one rank sends for it (the ring convention of passes/stats.h).
double collective_rank_bytes(OpId op, double payload, int p);

// Whether some instance of `group` holds ranks of two nodes, with
// `gpus_per_node` consecutive ranks per node.
bool group_crosses_nodes(const Mesh& mesh, const std::string& group, int gpus_per_node);

// One communication stream (a process group).
struct CommStream {
  std::string group;   // dp, shard, replicate
  int size = 0;        // ranks in the group
  bool inter_node = false;
  int64_t count = 0;   // collectives
  double bytes = 0;    // sent per rank (ring convention)
  double busy = 0;     // seconds the stream ran collectives
};

struct StepSimulation {
  double seconds = 0;          // the step: last compute or collective to end
  double compute = 0;          // busy seconds of the compute stream
  double matmul = 0;           // of which matmul, linear and attention
  double comm_host = 0;        // of which collectives' host time (host_overhead, host_bandwidth)
  double blocked = 0;          // compute idle in waits: exposed communication
  double flops = 0;            // matmul FLOPs of the step
  std::vector<CommStream> streams;  // in order of first use
  double comm_bytes() const;
};

// Simulates `traces` in order (forward, then backward: streams carry over)
// and then `extra_compute` seconds (the optimizer update) on the compute
// stream once every collective has ended.
StepSimulation simulate_step(const std::vector<const Trace*>& traces, const Mesh& mesh, const HardwareProfile& hw,
                             double extra_compute = 0);

}  // namespace fsdpc
