// The CUDA device decisions, without a GPU (executors/cuda/device.h): which
// device a rank takes (one visible device per rank under SLURM's
// --gpus-per-task or --gpu-bind; the local rank's when it sees them all),
// and when a GPU test skips rather than fails.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <string>

#include "executors/cuda/device.h"

using namespace fsdpc::cuda;
using Catch::Contains;

TEST_CASE("device selection: one visible device per rank is device 0 for every rank", "[cuda][device]") {
  for (int local_size : {1, 2, 4, 8})
    for (int local_rank = 0; local_rank < local_size; ++local_rank) {
      const DeviceChoice c = select_device(1, local_rank, local_size);
      CHECK(c.device == 0);
      CHECK(c.error.empty());
    }
}

TEST_CASE("device selection: with every device visible, each rank takes its local rank's", "[cuda][device]") {
  for (int visible : {2, 4, 8})
    for (int local_size = 1; local_size <= visible; ++local_size)
      for (int local_rank = 0; local_rank < local_size; ++local_rank)
        CHECK(select_device(visible, local_rank, local_size).device == local_rank);
}

TEST_CASE("device selection: no device, or fewer devices than ranks, is refused with advice", "[cuda][device]") {
  const DeviceChoice none = select_device(0, 0, 1);
  CHECK(none.device < 0);
  CHECK_THAT(none.error, Contains("no CUDA device"));
  const DeviceChoice few = select_device(2, 3, 4);
  CHECK(few.device < 0);
  CHECK_THAT(few.error, Contains("4 ranks on this node but 2 GPUs") && Contains("CUDA_VISIBLE_DEVICES"));
  CHECK(select_device(2, 0, 4).device < 0);  // every rank of the node refuses, rank 0 too
}

TEST_CASE("device selection: two ranks of a node given the same GPU are refused by name", "[cuda][device]") {
  // mpirun -np 2 on a one-GPU machine: each rank sees one device, device 0.
  const std::string same = shared_device_error({"0000:3B:00.0", "0000:3B:00.0"});
  CHECK_THAT(same, Contains("local ranks 0 and 1") && Contains("0000:3B:00.0") && Contains("one GPU per rank"));
  CHECK_THAT(shared_device_error({"0000:3B:00.0", "0000:5E:00.0", "0000:AF:00.0", "0000:5E:00.0"}),
             Contains("local ranks 1 and 3"));
  CHECK(shared_device_error({"0000:3B:00.0", "0000:5E:00.0"}).empty());  // bound one each
  CHECK(shared_device_error({"", ""}).empty());  // no device: reported by select_device instead
  CHECK(shared_device_error({}).empty());
}

namespace {

DeviceQuery failed_start(cudaError_t e, int driver_version) {
  DeviceQuery q;
  q.error = static_cast<int>(e);
  q.error_name = cudaGetErrorName(e);
  q.reason = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  q.driver_version = driver_version;
  q.runtime_version = 13000;
  return q;
}

}  // namespace

TEST_CASE("GPU tests: skipped only when there is no device or no driver", "[cuda][device]") {
  const GpuTestVerdict no_device = gpu_test_verdict(failed_start(cudaErrorNoDevice, 13000), 1);
  CHECK(no_device.kind == GpuTestVerdict::skip);
  CHECK_THAT(no_device.message, Contains("SKIPPED") && Contains("cudaErrorNoDevice"));

  // No driver at all (a build machine): the runtime says "insufficient
  // driver", but the driver version is 0.
  const GpuTestVerdict no_driver = gpu_test_verdict(failed_start(cudaErrorInsufficientDriver, 0), 1);
  CHECK(no_driver.kind == GpuTestVerdict::skip);
  CHECK_THAT(no_driver.message, Contains("no NVIDIA driver is installed"));

  DeviceQuery zero;  // success, zero devices
  zero.reason = "the CUDA runtime reports no device";
  CHECK(gpu_test_verdict(zero, 1).kind == GpuTestVerdict::skip);

  DeviceQuery one;
  one.count = 1;
  const GpuTestVerdict too_few = gpu_test_verdict(one, 2);
  CHECK(too_few.kind == GpuTestVerdict::skip);
  CHECK_THAT(too_few.message, Contains("needs 2 CUDA devices, and only 1"));
  CHECK(gpu_test_verdict(one, 1).kind == GpuTestVerdict::run);
}

TEST_CASE("GPU tests: a driver too old for the runtime, or any other start-up failure, fails with its error",
          "[cuda][device]") {
  const GpuTestVerdict old = gpu_test_verdict(failed_start(cudaErrorInsufficientDriver, 12040), 1);
  CHECK(old.kind == GpuTestVerdict::fail);
  CHECK_THAT(old.message, Contains("FAILED") && Contains("cudaErrorInsufficientDriver") &&
                              Contains("CUDA driver version is insufficient"));
  for (cudaError_t e : {cudaErrorInitializationError, cudaErrorSystemDriverMismatch, cudaErrorDevicesUnavailable,
                        cudaErrorCompatNotSupportedOnDevice}) {
    const GpuTestVerdict v = gpu_test_verdict(failed_start(e, 13000), 1);
    CHECK(v.kind == GpuTestVerdict::fail);
    CHECK_THAT(v.message, Contains(cudaGetErrorName(e)));
  }
}

TEST_CASE("device query: what this machine's runtime reports is self-consistent", "[cuda][device]") {
  const DeviceQuery q = query_devices();
  CHECK(q.runtime_version > 0);
  if (q.error != 0) {
    CHECK(q.count == 0);
    CHECK_THAT(q.reason, Contains(q.error_name));
  } else if (q.count == 0) {
    CHECK_FALSE(q.reason.empty());
  }
}
