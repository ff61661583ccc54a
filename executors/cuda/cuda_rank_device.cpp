// open_cuda_rank_device (cuda_rank_device.h).
#include "executors/cuda/cuda_rank_device.h"

#include <cstdlib>
#include <cstring>
#include <utility>

#include "executors/comm/mpi_check.h"
#include "executors/comm/mpi_world.h"
#include "executors/comm/nccl_executor.h"
#include "executors/cuda/cuda_backend.h"
#include "executors/cuda/device.h"
#include "executors/cuda/kernels/index.h"
#include "ir/error.h"

namespace fsdpc::cuda {

namespace {

// This rank's place among the ranks of its node, and how many there are.
// Collective over the world: every rank calls it before anything can fail.
std::pair<int, int> node_rank_and_size() {
  mpi_init();
  MPI_Comm node = MPI_COMM_NULL;
  FSDPC_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int r = 0, n = 0;
  FSDPC_MPI_CHECK(MPI_Comm_rank(node, &r));
  FSDPC_MPI_CHECK(MPI_Comm_size(node, &n));
  FSDPC_MPI_CHECK(MPI_Comm_free(&node));
  return {r, n};
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
  const auto [node_rank, node_size] = node_rank_and_size();
  const DeviceQuery q = query_devices();
  if (q.count == 0) fail("--executor cuda: no CUDA device is visible (", q.reason, ")");
  // NCCL refuses two ranks of one communicator on one GPU, deep inside its
  // init; select_device says so plainly first.
  const DeviceChoice choice = select_device(q.count, node_rank, node_size);
  if (choice.device < 0) fail("--executor cuda: ", choice.error);
  CudaOptions options;
  options.device = choice.device;
  const char* tf32 = std::getenv("FSDPC_CUDA_TF32");
  options.allow_tf32 = tf32 && std::strcmp(tf32, "1") == 0;
  return std::make_unique<CudaRankDevice>(mesh, options);
}

}  // namespace fsdpc::cuda
