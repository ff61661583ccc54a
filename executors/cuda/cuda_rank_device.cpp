// open_cuda_rank_device (cuda_rank_device.h).
#include "executors/cuda/cuda_rank_device.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "executors/comm/mpi_check.h"
#include "executors/comm/mpi_world.h"
#include "executors/comm/nccl_executor.h"
#include "executors/cuda/cuda_backend.h"
#include "executors/cuda/cuda_check.h"
#include "executors/cuda/device.h"
#include "executors/cuda/kernels/index.h"
#include "ir/error.h"

namespace fsdpc::cuda {

namespace {

// Each local rank's GPU, by PCI bus id ("" where a rank has none), known to
// every rank of the node. Collective over the world: every rank calls it
// before anything can fail.
struct NodeDevices {
  int rank = 0, size = 1;
  DeviceChoice choice;
  std::vector<std::string> bus_ids;
};

NodeDevices node_devices() {
  mpi_init();
  NodeDevices n;
  MPI_Comm node = MPI_COMM_NULL;
  FSDPC_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  FSDPC_MPI_CHECK(MPI_Comm_rank(node, &n.rank));
  FSDPC_MPI_CHECK(MPI_Comm_size(node, &n.size));
  const DeviceQuery q = query_devices();
  n.choice = q.count == 0 ? DeviceChoice{-1, "no CUDA device is visible (" + q.reason + ")"}
                          : select_device(q.count, n.rank, n.size);
  constexpr int kIdBytes = 64;
  std::vector<char> mine(kIdBytes, '\0'), all(static_cast<size_t>(kIdBytes) * static_cast<size_t>(n.size), '\0');
  if (n.choice.device >= 0) FSDPC_CUDA_CHECK(cudaDeviceGetPCIBusId(mine.data(), kIdBytes - 1, n.choice.device));
  FSDPC_MPI_CHECK(MPI_Allgather(mine.data(), kIdBytes, MPI_CHAR, all.data(), kIdBytes, MPI_CHAR, node));
  FSDPC_MPI_CHECK(MPI_Comm_free(&node));
  for (int r = 0; r < n.size; ++r) n.bus_ids.emplace_back(all.data() + static_cast<size_t>(r) * kIdBytes);
  return n;
}

class CudaRankDevice final : public RankDevice {
 public:
  CudaRankDevice(const Mesh& mesh, const CudaOptions& options)
      : nccl_(mesh, options), backend_(make_cuda_backend(nccl_)) {}
  KernelContext& kernels() override { return nccl_; }
  DeviceBackend& backend() override { return *backend_; }
  // NCCL progresses on the device; between statements only its errors need
  // looking at, and that costs a call per communicator: the step's end does it.
  // Index faults are read here, where the host waits anyway: a kernel cannot
  // throw at the bad index (kernels/index.h).
  void end_step() override {
    nccl_.synchronize_with_timeout();
    const IndexFaults f = read_index_faults(nccl_);
    if (f.count)
      fail(f.in_take ? "cuda_take" : "cuda_index_add", ": ", f.count,
           " index(es) outside the table in this step, the first at flat position ", f.first_position,
           " (token ids must be below the vocabulary size)");
  }
  std::vector<CollectiveTime> take_collective_times() override { return nccl_.take_times(); }

 private:
  NcclContext nccl_;
  std::unique_ptr<DeviceBackend> backend_;  // after nccl_: freed before its streams
};

}  // namespace

std::unique_ptr<RankDevice> open_cuda_rank_device(const Mesh& mesh) {
  // NCCL refuses two ranks of one communicator on one GPU, deep inside its
  // init; say so plainly first.
  const NodeDevices n = node_devices();
  if (n.choice.device < 0) fail("--executor cuda: ", n.choice.error);
  if (const std::string shared = shared_device_error(n.bus_ids); !shared.empty())
    fail("--executor cuda: ", shared);
  CudaOptions options;
  options.device = n.choice.device;
  const char* tf32 = std::getenv("FSDPC_CUDA_TF32");
  options.allow_tf32 = tf32 && std::strcmp(tf32, "1") == 0;
  return std::make_unique<CudaRankDevice>(mesh, options);
}

}  // namespace fsdpc::cuda
