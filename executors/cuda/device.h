// What the CUDA runtime can see on this machine, asked without failing when
// there is no driver or no device (a build machine without a GPU), and the
// two decisions taken from it, kept as pure functions so the CPU suite tests
// them (test/cuda_device_test.cpp): which device a rank takes, and whether a
// GPU test skips or fails.
#pragma once

#include <string>
#include <vector>

namespace fsdpc::cuda {

struct DeviceQuery {
  int count = 0;           // usable devices
  int error = 0;           // cudaGetDeviceCount's cudaError_t (0: success)
  std::string error_name;  // "cudaErrorInsufficientDriver", empty on success
  std::string reason;      // why count is 0, from the runtime's own error string
  int driver_version = 0;  // cudaDriverGetVersion: 0 when no driver is installed
  int runtime_version = 0;
};

DeviceQuery query_devices();

// The device a rank takes among `visible` devices, being `local_rank` of
// `local_size` ranks on its node; or an error message (device < 0).
//  - one visible device: device 0, whatever the node's rank count (the
//    launcher bound one GPU to each rank with CUDA_VISIBLE_DEVICES: SLURM
//    --gpus-per-task, --gpu-bind, or a wrapper script);
//  - at least as many devices as ranks on the node: the local rank's;
//  - none, or fewer than the ranks (but more than one): refused, since
//    NCCL refuses two ranks of one communicator on one GPU deep in its init.
struct DeviceChoice {
  int device = -1;
  std::string error;
};
DeviceChoice select_device(int visible, int local_rank, int local_size);

// With one visible device per rank, two ranks of a node may still have been
// given the same GPU (mpirun -np 2 on a one-GPU machine, or a wrong binding):
// given each local rank's PCI bus id (empty: no device), the message naming
// the first two that share one, or empty when all differ.
std::string shared_device_error(const std::vector<std::string>& bus_ids);

// What a GPU test does with what the runtime reported, needing `needed`
// devices: run; skip (exit 77) only when there is no device or no driver at
// all, or fewer devices than it needs; fail with the driver's error on any
// other start-up failure (a driver too old for this runtime, a broken
// installation), which a skip would hide.
struct GpuTestVerdict {
  enum Kind { run, skip, fail } kind = run;
  std::string message;
};
GpuTestVerdict gpu_test_verdict(const DeviceQuery& q, int needed);

}  // namespace fsdpc::cuda
