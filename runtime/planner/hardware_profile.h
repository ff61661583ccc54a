// A hardware profile: the rates the step simulator (runtime/planner/step_simulator.h)
// prices statements with, read from a small JSON file (hardware/*.json). Each
// figure carries the source of its number, so a table of predictions can say
// which parts are datasheet values and which are assumptions.
#pragma once

#include <map>
#include <string>

#include "ir/ops.h"
#include "ir/target.h"
#include "ir/types.h"

namespace fsdpc {

struct Figure {
  double value = 0;
  std::string source;  // a datasheet, a measurement, or "assumption: ..."
};

// One kind of link between ranks: bandwidth is per rank, one direction.
// host_overhead (optional, 0: none) is what each collective over the link
// costs the rank's compute stream: the host time to start it, test it
// between kernels while it is in flight, and complete it at its wait. On a
// GPU that is a launch; on the CPU runtime over MPI it is microseconds,
// which a step of many small unbucketed collectives feels. host_bandwidth
// (optional, 0: none) is the bytes a rank sends per second of its compute
// stream's time: Open MPI over shared memory copies them on the rank's own
// thread, in the progress calls between kernels, so even a collective
// hidden behind compute takes compute time; NCCL's and a NIC's transfers
// take none.
// reduce_scatter_bandwidth and all_reduce_bandwidth (optional, 0: bandwidth)
// are those collectives' rates where they differ from all_gather's: NCCL
// reduces on the GPU as it moves, while Open MPI reduces on the host, and on
// one host here ran its reduce_scatter at a fifth of its all_gather's rate
// and its all_reduce at two thirds (tools/link_probe_command.cpp).
struct LinkProfile {
  Figure bandwidth, latency, sustained_fraction;
  Figure host_overhead, host_bandwidth;
  Figure reduce_scatter_bandwidth, all_reduce_bandwidth;
  double effective_bandwidth() const { return bandwidth.value * sustained_fraction.value; }
  // The effective bandwidth of collective `op`.
  double effective_bandwidth(OpId op) const;
};

struct HardwareProfile {
  std::string name, description;
  std::string file;               // where it was read from ("" when built in code)
  Target executor = Target::cpu;  // cpu | cuda: how candidates are compiled and claimed
  DType precision = DType::f32;   // f32 | bf16: the default --precision
  Figure gpus_per_node;           // ranks per node
  Figure peak_flops_bf16, peak_flops_f32, matmul_sustained_fraction;
  Figure memory_bandwidth, memory_sustained_fraction;
  Figure memory_capacity;  // bytes per rank; optional (value 0: not stated)
  Figure kernel_overhead;  // seconds each compute statement costs beyond its work; optional (0)
  // The same for a fused region and for a matmul-family kernel, where they
  // differ from a plain statement's; optional (value 0: kernel_overhead).
  Figure region_overhead, matmul_overhead;
  // Element-operations per second of a fused region (one op on one
  // element); optional (0: regions priced by their bytes alone). A region
  // with a row reduction (amax, sum) at row_region_rate when given.
  Figure elementwise_rate, row_region_rate;
  // Seconds of work of each distinct matmul statement, by its
  // matmul_signature() (runtime/planner/step_simulator.h): what one call of the
  // kernel took beyond a negligible matmul's call, measured by `--hardware
  // local` on the shapes the candidates run (optional; a statement not
  // listed is priced at the sustained rate). Small and skinny shapes run
  // well below a square sgemm's rate, so one rate misprices a model's step.
  std::map<std::string, double> matmul_seconds;
  std::string matmul_seconds_source;
  LinkProfile intra_node, inter_node;
};

// Parses a profile; fsdpc::Error naming `file` and the field that is missing
// or out of range ("hardware/x.json: compute.peak_flops_bf16.value: expected a
// positive number").
HardwareProfile parse_hardware_profile(const std::string& json_text, const std::string& file);
// The profile as JSON that parse_hardware_profile reads back.
std::string hardware_profile_json(const HardwareProfile& p);

}  // namespace fsdpc
