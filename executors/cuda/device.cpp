// Device discovery through the CUDA runtime, every return code checked and
// reported in the runtime's own words; the device and GPU-test decisions.
#include "executors/cuda/device.h"

#include <cuda_runtime_api.h>

namespace fsdpc::cuda {

namespace {

std::string version_text(int v) {
  return v == 0 ? std::string("none") : std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

}  // namespace

DeviceQuery query_devices() {
  DeviceQuery q;
  // Both answer without a driver: 0 for the driver means none is installed.
  if (cudaDriverGetVersion(&q.driver_version) != cudaSuccess) q.driver_version = 0;
  if (cudaRuntimeGetVersion(&q.runtime_version) != cudaSuccess) q.runtime_version = 0;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: clear it for whoever asks next
    q.error = static_cast<int>(err);
    q.error_name = cudaGetErrorName(err);
    q.reason = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(err) + ": " + cudaGetErrorString(err) +
               " (driver supports CUDA " + version_text(q.driver_version) + ", runtime is CUDA " +
               version_text(q.runtime_version) + ")";
    return q;
  }
  q.count = count;
  if (count == 0) q.reason = "the CUDA runtime reports no device";
  return q;
}

DeviceChoice select_device(int visible, int local_rank, int local_size) {
  DeviceChoice c;
  if (visible <= 0) {
    c.error = "no CUDA device is visible";
  } else if (visible == 1) {
    c.device = 0;
  } else if (local_rank >= 0 && local_rank < local_size && local_size <= visible) {
    c.device = local_rank;
  } else {
    c.error = std::to_string(local_size) + " ranks on this node but " + std::to_string(visible) +
              " GPUs visible to each; run one rank per GPU (mpirun -np <= " + std::to_string(visible) +
              " per node), or bind one GPU to each rank (CUDA_VISIBLE_DEVICES, srun --gpus-per-task=1)";
  }
  return c;
}

std::string shared_device_error(const std::vector<std::string>& bus_ids) {
  for (size_t i = 0; i < bus_ids.size(); ++i)
    for (size_t j = i + 1; j < bus_ids.size(); ++j)
      if (!bus_ids[i].empty() && bus_ids[i] == bus_ids[j])
        return "local ranks " + std::to_string(i) + " and " + std::to_string(j) + " of this node both took the GPU at " +
               bus_ids[i] + ", and NCCL needs one GPU per rank; bind a different GPU to each rank (CUDA_VISIBLE_DEVICES, "
               "srun --gpus-per-task=1) or run fewer ranks per node";
  return {};
}

GpuTestVerdict gpu_test_verdict(const DeviceQuery& q, int needed) {
  GpuTestVerdict v;
  const std::string need = needed == 1 ? "a CUDA device" : std::to_string(needed) + " CUDA devices";
  if (q.error != 0 && q.error != static_cast<int>(cudaErrorNoDevice) && q.driver_version != 0) {
    v.kind = GpuTestVerdict::fail;
    v.message = "FAILED: the CUDA runtime did not start, and not for want of a device: " + q.reason;
  } else if (q.count == 0) {
    v.kind = GpuTestVerdict::skip;
    v.message = "SKIPPED: this test needs " + need + ", and none is visible: " +
                (q.error != 0 && q.driver_version == 0 ? "no NVIDIA driver is installed (" + q.reason + ")"
                                                       : q.reason);
  } else if (q.count < needed) {
    v.kind = GpuTestVerdict::skip;
    v.message = "SKIPPED: this test needs " + need + ", and only " + std::to_string(q.count) + " are visible";
  }
  return v;
}

}  // namespace fsdpc::cuda
