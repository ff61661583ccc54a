// Device discovery through the CUDA runtime; every return code is checked
// and reported in the runtime's own words.
#include "executors/cuda/device.h"

#include <cuda_runtime_api.h>

namespace fsdpc::cuda {

DeviceQuery query_devices() {
  DeviceQuery q;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    q.reason = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(err) + ": " +
               cudaGetErrorString(err);
    return q;
  }
  q.count = count;
  if (count == 0) q.reason = "the CUDA runtime reports no device";
  return q;
}

}  // namespace fsdpc::cuda
